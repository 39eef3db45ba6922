package daemon

import (
	"context"

	"github.com/my-pi/bindery/binding"
)

// unknownSignature is the reason of a release by a signature bindery has no
// block for.
const unknownSignature = "no thinking block with this signature is known in this conversation (not in a remembered compile, not stamped, not in its session file): nothing was recorded"

// blockKnown reports whether the block with key could have reached the
// provider in conversation c: a remembered compile sent it, an accept or
// the session file stamped it, or the session file holds it. A release by
// signature of anything else records nothing: bindery never kept such a
// block (an unstamped block is stripped, not kept), so there is nothing
// to release, and recording it would let any caller grow the state folder
// with made-up signatures.
func (b *Binder) blockKnown(ctx context.Context, c *conv, key binding.Digest) (bool, error) {
	for e := range c.recorded {
		for _, k := range e.rec.Kept {
			if k.Key == key {
				return true, nil
			}
		}
	}
	keys := []binding.Digest{key}
	stamps, err := b.db.Stamps(ctx, keys)
	if err != nil {
		return false, err
	}
	if len(stamps) > 0 {
		return true, nil
	}
	entries, err := b.db.BlockEntries(ctx, c.id, keys)
	if err != nil {
		return false, err
	}
	return len(entries) > 0, nil
}
