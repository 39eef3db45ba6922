package api

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// MinShortID is the shortest prefix ShortIDs prints: long enough to read as
// an id, short enough for a table.
const MinShortID = 8

// ShortIDs gives each id the shortest prefix of at least MinShortID bytes
// that no other id of ids starts with, so a table can print it and a user
// can paste it back (MatchID finds it). An id that is itself a prefix of
// another is printed whole: an exact match always wins in MatchID.
func ShortIDs(ids []string) map[string]string {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	sorted = slices.Compact(sorted) // a session id two files carry is one id
	out := make(map[string]string, len(ids))
	for i, id := range sorted {
		need := MinShortID
		if i > 0 {
			need = max(need, commonPrefix(id, sorted[i-1])+1)
		}
		if i+1 < len(sorted) {
			need = max(need, commonPrefix(id, sorted[i+1])+1)
		}
		out[id] = id[:min(need, len(id))]
	}
	return out
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// MatchID resolves what a user typed against ids: the id itself, else the
// one id it is a prefix of. found is "" when none matches; ambiguous lists
// the matches when more than one does.
func MatchID(ids []string, typed string) (found string, ambiguous []string) {
	if typed == "" {
		return "", nil
	}
	var matches []string
	for _, id := range ids {
		if id == typed {
			return id, nil
		}
		if strings.HasPrefix(id, typed) {
			matches = append(matches, id)
		}
	}
	sort.Strings(matches)
	matches = slices.Compact(matches)
	if len(matches) == 1 {
		return matches[0], nil
	}
	return "", matches
}

// AmbiguousIDError is a prefix that more than one id starts with.
type AmbiguousIDError struct {
	What, Typed string
	Matches     []string
}

func (e *AmbiguousIDError) Error() string {
	shown := e.Matches
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(e.Matches)-5)
	}
	return fmt.Sprintf("%s %q is ambiguous: it starts %s%s; type more of it", e.What, e.Typed, strings.Join(shown, ", "), more)
}
