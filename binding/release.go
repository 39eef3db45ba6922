package binding

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Releases made outside a compile (a host's 400, a signature), which
// releases reach which branch (pi's tree, forks named with parent), and how
// many compiles a branch remembers.

// ParsePath parses "messages.N.content.M".
func ParsePath(s string) (Pos, error) {
	rest, ok := strings.CutPrefix(s, "messages.")
	if !ok {
		return Pos{}, fmt.Errorf("%w: %q", ErrBadPath, s)
	}
	n, rest, ok := strings.Cut(rest, ".content.")
	if !ok {
		return Pos{}, fmt.Errorf("%w: %q", ErrBadPath, s)
	}
	mi, err1 := strconv.Atoi(n)
	bi, err2 := strconv.Atoi(rest)
	if err1 != nil || err2 != nil || mi < 0 || bi < 0 {
		return Pos{}, fmt.Errorf("%w: %q", ErrBadPath, s)
	}
	return Pos{mi, bi}, nil
}

// ReleaseAtPath is a host's report of a 400 naming sentPath (a path in the
// request as sent, as the provider names it): it releases that block and
// every later thinking block the compile sent (the provider says removing
// only the named block is not enough: the edit bindery could not see
// precedes all of them). ErrBadPath when the path names no thinking block
// the compile sent. The daemon should also store MarkRefused(rec): the
// refused request minted nothing. A bad-signature 400 is not a binding
// refusal: the host releases that block by signature, and bindery never
// "fixes" a signature.
func ReleaseAtPath(rec *CompileRecord, sentPath string) ([]Release, error) {
	if rec == nil {
		return nil, ErrUnknownCompile
	}
	p, err := ParsePath(sentPath)
	if err != nil {
		return nil, err
	}
	k := rec.keptAt(p)
	if k < 0 {
		return nil, fmt.Errorf("%w: %s in compile %s", ErrBadPath, sentPath, rec.ID)
	}
	out := make([]Release, 0, len(rec.Kept)-k)
	for _, kb := range rec.Kept[k:] {
		out = append(out, Release{Key: kb.Key, Reason: ReleaseHost, Compile: rec.ID, Message: kb.Orig.Message, Path: kb.Orig.Path()})
	}
	return out, nil
}

// MarkRefused returns a copy of rec marked Refused: the provider refused its
// request, so no reply was minted under it and attribution ignores it.
func MarkRefused(rec *CompileRecord) *CompileRecord {
	r := *rec
	r.Refused = true
	return &r
}

// SignatureKey is the key of a thinking block from its signature (or of a
// redacted thinking block from its data), decoded: the same value as
// Block.Key. A release by signature releases this key on every branch of the
// conversation.
func SignatureKey(signature string) Digest { return sha256.Sum256([]byte(signature)) }

// SignatureRelease is the release of one block by its signature.
func SignatureRelease(signature string) Release {
	return Release{Key: SignatureKey(signature), Reason: ReleaseHost, Message: -1}
}

// PathEntry is one entry on a pi branch's path from the root, with the
// daemon's ingest sequence for it (the order bindery ingested entries in,
// not their timestamps).
type PathEntry struct {
	ID  string
	Seq int64
}

// ReleaseReaches decides, for pi's session tree, whether a release made on
// the branch ending at leaf L applies to a compile at leaf L'
// (design/binding.md "Branches and forks"):
//
//	madeOn:   L's path, root first;
//	released: the entry id of the message that holds the block;
//	seq:      the daemon's sequence when the release was recorded;
//	at:       L''s path, root first (for a leaf not ingested yet, the path of
//	          the deepest known ancestor the request proves).
//
// It applies when the released message is on L's path and either L'
// descends from L (or is L), or the first entry of L' not on L's path was
// ingested after the release. Decision where the design is silent: when L'
// is a proper ancestor of L (the user went back, or the new leaf is not
// ingested yet) it applies, since the entry that will diverge from L is
// necessarily ingested after the release. A released message that is not
// on L”s path does not matter to L' either way; this reports it as
// reaching when the rule says so.
func ReleaseReaches(madeOn []PathEntry, released string, seq int64, at []PathEntry) bool {
	on := false
	for _, e := range madeOn {
		if e.ID == released {
			on = true
			break
		}
	}
	if !on {
		return false
	}
	for i, e := range at {
		if i >= len(madeOn) {
			return true // L' descends from L
		}
		if e.ID != madeOn[i].ID {
			return e.Seq > seq // first entry of L' not on L's path
		}
	}
	return true // L' is L or an ancestor of L
}

// InheritedReleases is what a fork named with parent (a non-pi branch, or
// a pi session file whose header names parentSession) starts with: the
// parent's releases recorded at or before forkSeq, the daemon's sequence
// when the fork was made. Releases on the parent after that do not reach it.
func InheritedReleases(parent []Release, forkSeq int64) []Release {
	var out []Release
	for _, r := range parent {
		if r.Seq <= forkSeq {
			out = append(out, r)
		}
	}
	return out
}

// MinRemembered is how many of a branch's most recent unaccepted compiles
// bindery remembers at least.
const MinRemembered = 32

// RememberedCompile is what retention needs of a remembered compile.
type RememberedCompile struct {
	ID       string
	Seq      int64
	Accepted bool
}

// Retain returns the ids of a branch's compiles to forget: it keeps the
// MinRemembered most recent unaccepted compiles, the owner, and the
// MinRemembered most recent accepted ones (attribution still needs an
// accepted compile whose reply was not passed until the next request shows
// it). Accepting a forgotten unaccepted compile is ErrUnknownCompile; for a
// forgotten accepted one the daemon keeps its id (a tombstone) so that a
// repeated accept still answers 200.
func Retain(compiles []RememberedCompile, owner string) []string {
	cs := append([]RememberedCompile(nil), compiles...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Seq > cs[j].Seq })
	var forget []string
	unacc, acc := 0, 0
	for _, c := range cs {
		if c.ID == owner {
			continue
		}
		if c.Accepted {
			acc++
			if acc > MinRemembered {
				forget = append(forget, c.ID)
			}
			continue
		}
		unacc++
		if unacc > MinRemembered {
			forget = append(forget, c.ID)
		}
	}
	return forget
}
