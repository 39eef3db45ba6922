package daemon

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strconv"
	"strings"

	"github.com/my-pi/bindery/api"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newCompileID is prefix, the compile's seq in base 36, '_' and 8 random
// bytes. The seq lets an accept of an id the conversation no longer
// remembers be told apart from one this database never made (seqs only
// grow, so a seq at or below the high-water was made here): the answer
// says which (compile_forgotten or unknown_compile) without keeping any
// per-compile memory past the retention window.
func newCompileID(prefix string, seq int64) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + strconv.FormatInt(seq, 36) + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// idSeq is the seq an id made by newCompileID carries (false for ids of
// older versions, which carry none, and for anything else).
func idSeq(id string) (int64, bool) {
	if len(id) < 2 {
		return 0, false
	}
	s, _, ok := strings.Cut(id[2:], "_")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 36, 64)
	return n, err == nil && n > 0
}

// unknownCompile answers an accept or release of a compile the
// conversation does not remember: forgotten (made here and beyond the
// retention window, README "Retention") or unknown.
func (b *Binder) unknownCompile(ctx context.Context, id string) error {
	keep := b.keep
	seq, ok := idSeq(id)
	if !ok {
		return api.Errorf(api.CodeUnknownCompile, "compile %q is unknown, or was forgotten (an id without a seq, made before ids carried one, cannot be told apart)", id)
	}
	high, err := b.seqHighWater(ctx)
	if err != nil {
		return err
	}
	if seq > high {
		return api.Errorf(api.CodeUnknownCompile, "compile %q was never made by this bindery (its seq %d is beyond the last, %d: another database, or a mistyped id)", id, seq, high)
	}
	return api.Errorf(api.CodeCompileForgotten, "compile %q was made by this bindery and has been forgotten: a conversation remembers its %d most recent accepted compiles (a repeated accept of one answers 200 with repeated=true; an older one was recorded when it was first accepted, and this answer records nothing) and the %d most recent unaccepted compiles of a branch (an older one can no longer be accepted)",
		id, keep.Tombstones, keep.PerBranch)
}
