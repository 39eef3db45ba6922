package api

import (
	"errors"
	"strings"
	"testing"
)

func TestShortIDsPasteBack(t *testing.T) {
	ids := []string{
		"0193e6c4-aaaa-7000-8000-000000000001", // same minute as the next: a long prefix
		"0193e6c4-aaaa-7000-8000-000000000002",
		"0193e6d9-0000-7000-8000-000000000003",
		"ffae836b-9420-7000-8000-000000000004",
		"abc",                   // shorter than MinShortID: printed whole
		"abcdef01", "abcdef012", // one a prefix of the other
		"ffae836b-9420-7000-8000-000000000004", // the same id in two files
	}
	short := ShortIDs(ids)
	want := map[string]string{
		ids[0]: "0193e6c4-aaaa-7000-8000-000000000001", ids[1]: "0193e6c4-aaaa-7000-8000-000000000002",
		ids[2]: "0193e6d9", ids[3]: "ffae836b", "abc": "abc", "abcdef01": "abcdef01", "abcdef012": "abcdef012",
	}
	for id, w := range want {
		if short[id] != w {
			t.Errorf("ShortIDs[%s] = %q, want %q", id, short[id], w)
		}
	}
	// Every printed prefix resolves to its own id.
	for _, id := range ids {
		if got, amb := MatchID(ids, short[id]); got != id {
			t.Errorf("MatchID(%q) = %q %v, want %s", short[id], got, amb, id)
		}
	}
	if got, amb := MatchID(ids, "0193e6c4"); got != "" || len(amb) != 2 {
		t.Errorf("an ambiguous prefix: %q %v", got, amb)
	}
	if got, _ := MatchID(ids, "ffae"); got != ids[3] {
		t.Errorf("a prefix of one id carried twice: %q", got)
	}
	if got, amb := MatchID(ids, "zzz"); got != "" || amb != nil {
		t.Errorf("no match: %q %v", got, amb)
	}
	err := error(&AmbiguousIDError{What: "session", Typed: "0193", Matches: ids[:3]})
	if e, ok := errors.AsType[*AmbiguousIDError](err); !ok || !strings.Contains(e.Error(), "is ambiguous") {
		t.Errorf("error: %v", err)
	}
}
