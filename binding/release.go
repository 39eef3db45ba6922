package binding

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
)

// Releases made outside a compile: a host's 400, a signature. Which
// releases reach which branch is reach.go; how many compiles a
// conversation remembers, retention.go.

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
