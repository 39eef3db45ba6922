package daemon

import (
	"testing"

	"github.com/my-pi/bindery/binding"
)

// TestStampsFromLastCompile: the stamps a compile is given come from the
// last compile's answer only where its stamp is the key's own; at another
// position, a key it had none for, or a new key, the cache answers, and a
// key with no stamp anywhere gets none.
func TestStampsFromLastCompile(t *testing.T) {
	e := newBindingEnv(t, nil)
	key := func(s string) binding.Digest { return binding.Digest{s[0]} }
	st := func(s string) *binding.Stamp { return &binding.Stamp{Key: key(s), Model: "m-" + s} }
	sa, sb, sc := st("a"), st("b"), st("c")
	c := &conv{id: "x", stamps: map[binding.Digest]*binding.Stamp{key("a"): sa, key("b"): sb}}
	keys := []binding.Digest{key("a"), key("b"), key("c")}
	check := func(name string, got []*binding.Stamp, want ...*binding.Stamp) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d stamps, want %d", name, len(got), len(want))
		}
		model := func(st *binding.Stamp) string {
			if st == nil {
				return "none"
			}
			return st.Model
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: stamp %d is %s's, want %s's", name, i, model(got[i]), model(want[i]))
			}
		}
	}
	// the last compile's stamps at other positions (a block removed)
	c.lastStamps = []*binding.Stamp{sb, sa}
	got, err := e.b.stamps(t.Context(), c, keys)
	if err != nil {
		t.Fatal(err)
	}
	check("shifted", got, sa, sb, nil)
	check("kept for the next", c.lastStamps, sa, sb, nil)
	// c stamped since: the last answer had none for it
	c.stamps[key("c")] = sc
	got, err = e.b.stamps(t.Context(), c, keys)
	if err != nil {
		t.Fatal(err)
	}
	check("stamped since", got, sa, sb, sc)
	// the last answer's stamps are taken without the cache
	c.stamps = map[binding.Digest]*binding.Stamp{}
	got, err = e.b.stamps(t.Context(), c, keys[:2])
	if err != nil {
		t.Fatal(err)
	}
	check("from the last answer", got, sa, sb)
}
