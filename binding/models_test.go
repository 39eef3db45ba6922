package binding

import (
	"errors"
	"testing"
)

func TestNormalizeModel(t *testing.T) {
	for in, want := range map[string]string{
		"claude-opus-5-5":                             "claude-opus-5-5",
		"claude-opus-5-5-20261001":                    "claude-opus-5-5",
		"anthropic/claude-opus-5.5":                   "claude-opus-5-5",
		"Claude-Fable-5-1":                            "claude-fable-5-1",
		"claude-fable-5-1@20260901":                   "claude-fable-5-1",
		"anthropic.claude-fable-5-1-20260901-v1:0":    "claude-fable-5-1",
		"us.anthropic.claude-haiku-5-5-20261007-v1:0": "claude-haiku-5-5",
		"arn:aws:bedrock:us-east-1:1:inference-profile/global.anthropic.claude-opus-5-5-v1:0": "claude-opus-5-5",
		"claude-sonnet-5-latest":        "claude-sonnet-5",
		"claude-3.7-sonnet":             "claude-3-7-sonnet",
		"anthropic/claude-sonnet-4.5":   "claude-sonnet-4-5",
		"claude-opus-4-1-20250805":      "claude-opus-4-1",
		"openrouter/claude-opus-5:beta": "claude-opus-5",
	} {
		if got := NormalizeModel(in); got != want {
			t.Errorf("NormalizeModel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDefaultModelTable(t *testing.T) {
	m := DefaultModelTable()
	binds := map[string]bool{
		"claude-fable-5-2": true, "claude-mythos-5-2": true, "claude-fable-5-1": true,
		"claude-mythos-5-1": true, // [CONFLICT] -> binds
		"claude-opus-5-5":   true, "claude-sonnet-5-5": true, "claude-haiku-5-5": true,
		"claude-opus-6":                     false, // unknown -> binds (checked below)
		"claude-sonnet-5":                   false,
		"claude-opus-5-20260101":            false,
		"claude-fable-5":                    false,
		"claude-opus-4-8":                   false,
		"claude-sonnet-4-5-20250929":        false,
		"claude-3-5-haiku":                  false,
		"us.anthropic.claude-opus-5-5-v1:0": true,
	}
	binds["claude-opus-6"] = true
	for model, want := range binds {
		if got := m.Binds(model); got != want {
			t.Errorf("Binds(%s) = %v", model, got)
		}
	}
	if m.Known("claude-opus-6") || !m.Known("claude-opus-4-8") {
		t.Error("Known")
	}
	reads := []struct {
		target, minter string
		want           bool
	}{
		{"claude-fable-5-1", "claude-mythos-5-1", true},
		{"claude-fable-5-1", "claude-opus-5", true},
		{"claude-fable-5-1", "claude-sonnet-4-5", true},
		{"claude-fable-5-1", "claude-opus-5-5", true},                 // Claude API
		{"anthropic.claude-fable-5-1-v1:0", "claude-opus-5-5", false}, // Bedrock
		{"claude-fable-5-1@20260901", "claude-opus-5-5", false},       // Vertex
		{"claude-fable-5-1", "claude-fable-5-2", false},
		{"claude-opus-5-5", "claude-fable-5-1", false},
		{"claude-opus-5-5", "claude-opus-5", true},
		{"claude-opus-5-5", "claude-haiku-4-5", true},
		{"claude-sonnet-5", "claude-opus-5-5", false},
		{"claude-sonnet-5", "claude-opus-4-8", true},
		{"claude-haiku-5-5", "claude-opus-5-5", false},
		{"claude-fable-5-2", "claude-mythos-5-2", true},
		{"claude-opus-6", "claude-opus-5-5", false},
		{"us.anthropic.claude-opus-5-5-v1:0", "claude-opus-5-5-20261001", true}, // same model, any route
	}
	for _, r := range reads {
		if got := m.Reads(r.target, r.minter); got != r.want {
			t.Errorf("Reads(%s, %s) = %v", r.target, r.minter, got)
		}
	}
}

func TestParseModelTable(t *testing.T) {
	m, err := ParseModelTable([]byte(`{"models":[{"id":"claude-opus-6-20270101","binds":true,"reads":["claude-opus-5-5","group:legacy"]},{"id":"claude-sonnet-5","binds":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Known("claude-opus-6") || !m.Reads("claude-opus-6", "claude-opus-5-5") || !m.Reads("claude-opus-6", "claude-opus-4-1") {
		t.Error("overlay row")
	}
	if !m.Binds("claude-sonnet-5") || m.Binds("claude-opus-5") {
		t.Error("overlay replaces by id, keeps the rest")
	}
	if DefaultModelTable().Binds("claude-sonnet-5") {
		t.Error("overlay changed the default table")
	}
	r, err := ParseModelTable([]byte(`{"replace":true,"models":[{"id":"x-*","binds":false}]}`))
	if err != nil || r.Binds("x-1") || !r.Binds("claude-sonnet-5") {
		t.Errorf("replace: %v", err)
	}
	for _, bad := range []string{
		``, `{`, `{"models":[{"id":""}]}`, `{"models":[{"id":"a*b"}]}`,
		`{"models":[{"id":"a"},{"id":"A"}]}`, `{"models":[{"id":"a","reads":["group:nope"]}]}`,
		`{"models":[{"id":"a","bind":true}]}`,
	} {
		if _, err := ParseModelTable([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	var e *Error
	if errors.As(nil, &e) {
		t.Fatal()
	}
}
