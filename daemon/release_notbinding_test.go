package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// TestGapReleaseNotOnTargetThatDoesNotBind: a database written before
// issue 31 holds a gap release recorded for a target that does not bind
// (the old choice ran the run rule there too). Read from the store as it
// is, with no migration, it no longer strips that block for a target that
// does not bind (nor for one the host says does not bind), while it still
// does for a target that binds, and a release for any other reason still
// reaches every target.
func TestGapReleaseNotOnTargetThatDoesNotBind(t *testing.T) {
	e := newBindingEnv(t, nil)
	ctx := context.Background()
	fable := request("old", 3, 10)
	stampAll(t, e, "old", fable)
	rel := func(sig, reason string, msg int) db.ReleaseRow {
		return db.ReleaseRow{Release: binding.Release{Key: binding.SignatureKey(sig), Reason: reason, Compile: "before-31", Message: msg,
			Path: binding.Pos{Message: msg, Block: 0}.Path()}, Conversation: "old", Branch: "main", CreatedMs: 1}
	}
	err := e.j.Write(ctx, func(ctx context.Context, tx *db.Tx, _ Emit) error {
		_, err := tx.InsertReleases(ctx, []db.ReleaseRow{rel("sig-old-1", "gap", 3), rel("sig-old-0", "prefix-changed", 1)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	for _, tc := range []struct {
		name  string
		body  []byte
		binds *bool
		want  []string
	}{
		{"Sonnet 5", []byte(strings.Replace(string(fable), "claude-fable-5-2", "claude-sonnet-5", 1)), nil,
			[]string{"messages.1.content.0 released"}},
		{"the host says it does not bind", fable, &no, []string{"messages.1.content.0 released"}},
		{"Fable 5.2", fable, nil, []string{"messages.1.content.0 released", "messages.3.content.0 released"}},
	} {
		ans, err := e.b.Compile(ctx, &api.CompileCall{Conversation: "old", Branch: "main", Request: tc.body, BindsThinking: tc.binds, Return: api.ReturnPlan, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range ans.Strips {
			got = append(got, s.Path+" "+s.Reason)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: strips %q, want %q", tc.name, got, tc.want)
		}
	}
}
