package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"

	"github.com/my-pi/bindery/api"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newCompileID is prefix, the compile's seq in base 36, then (when the
// binder has one) '.' and the minting machine's tag, then '_' and 8
// random bytes.
//
// The seq lets an accept of an id the conversation no longer remembers be
// told apart from one this database never made (seqs only grow, so a seq
// at or below the high-water was made here): the answer says which
// (compile_forgotten or unknown_compile) without keeping any per-compile
// memory past the retention window. A seq is one machine's own count,
// though: two machines of a shared tier both make seq 7. The tag says
// whose count it is, so the rule reads "at or below the high-water of the
// machine that made it", and an id made on another machine is never taken
// for one this machine forgot: its accept goes to the shared tier
// (foreign.go). Ids are unique across machines by the random part alone
// (64 bits); the tag is what makes them answerable.
func newCompileID(prefix string, seq int64, tag string) string {
	var b [8]byte
	rand.Read(b[:])
	s := prefix + strconv.FormatInt(seq, 36)
	if tag != "" {
		s += "." + tag
	}
	return s + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// machineTag is the tag ids minted under machine carry: 20 bits of the
// name's SHA-256 in lower-case base32 (4 characters, no '.' or '_'; an id
// stays short enough for show's table in 80 columns). ""
// for no name. Two machines of a team share a tag once in about a million
// pairs: an id of the other is then taken for one of this machine, its
// accept is not looked for in the tier and answers unknown, and the reply
// is stripped at the next compile (no stamp): safe, and said in the error.
func machineTag(machine string) string {
	if machine == "" {
		return ""
	}
	h := sha256.Sum256([]byte(machine))
	return strings.ToLower(idEncoding.EncodeToString(h[:3]))[:4]
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
	s, _, _ = strings.Cut(s, ".")
	n, err := strconv.ParseInt(s, 36, 64)
	return n, err == nil && n > 0
}

// idTag is the machine tag an id carries ("" for ids made before ids
// carried one, or by a binder without a machine).
func idTag(id string) string {
	if len(id) < 2 {
		return ""
	}
	s, _, ok := strings.Cut(id[2:], "_")
	if !ok {
		return ""
	}
	_, tag, _ := strings.Cut(s, ".")
	return tag
}

// foreignID reports whether id was minted by another machine: it carries
// a tag, and not this binder's.
func (b *Binder) foreignID(id string) bool {
	tag := idTag(id)
	return tag != "" && tag != b.tag
}

// unknownCompile answers an accept or release of a compile the
// conversation does not remember: forgotten (made here and beyond the
// retention window, README "Retention") or unknown.
func (b *Binder) unknownCompile(ctx context.Context, id string) error {
	keep := b.keep
	if b.foreignID(id) {
		if b.shared == nil {
			return api.Errorf(api.CodeUnknownCompile, "compile %q was made by another machine (tag %s; this one is %s), and this bindery shares no tier with it (--shared)", id, idTag(id), b.tag)
		}
		return api.Errorf(api.CodeUnknownCompile, "compile %q was made by another machine (tag %s) and the shared tier did not hold it within %s (not shipped yet, the tier unreachable, or forgotten there)", id, idTag(id), b.shared.wait)
	}
	seq, ok := idSeq(id)
	if !ok {
		return api.Errorf(api.CodeUnknownCompile, "compile %q is unknown, or was forgotten (an id without a seq, made before ids carried one, cannot be told apart)", id)
	}
	high, err := b.seqHighWater(ctx)
	if err != nil {
		return err
	}
	if seq > high {
		return api.Errorf(api.CodeUnknownCompile, "compile %q was never made by this bindery (its seq %d is beyond the last, %d: another database, a machine whose tag is this one's, or a mistyped id)", id, seq, high)
	}
	return api.Errorf(api.CodeCompileForgotten, "compile %q was made by this bindery and has been forgotten: a conversation remembers its %d most recent accepted compiles (a repeated accept of one answers 200 with repeated=true; an older one was recorded when it was first accepted, and this answer records nothing) and the %d most recent unaccepted compiles of a branch (an older one can no longer be accepted)",
		id, keep.Tombstones, keep.PerBranch)
}
