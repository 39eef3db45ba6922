package binding

import "slices"

// A conversation remembers many compile records (Retention: up to
// AcceptedRecords accepted ones), and each holds its whole sent history
// (Sent, Kept): a long conversation's records held that history once per
// record. Yet the records of one conversation compiled turn after turn
// repeat each other: the next compile sends what the last one sent, then
// more. ShareTail makes a record hold only what it adds, in memory: its
// Sent and Kept become the earlier record's elements followed by its own,
// in one array the records share, extended in place while they keep
// following each other. A record's contents never change (the elements are
// equal, compared, never assumed), only where they are kept.

// ShareTip is the shared arrays a conversation's next record may extend
// in place: the Sent and Kept of the record that last extended them, whole.
// No record other than that one reaches past its own length into them, so
// the next record may write there. The zero value holds nothing.
type ShareTip struct {
	sent []SentMessage
	kept []KeptBlock
}

// ShareTail rewrites rec's Sent and Kept to share base's elements where rec
// repeats them (the longest equal prefix), extending tip's arrays in place
// when base is exactly what tip holds, and updates tip to rec's. base nil,
// or nothing shared: rec keeps arrays of its own (its sent blocks copied
// out of the decision's scratch, so it holds only its own) and becomes the
// tip. The caller owns tip and calls ShareTail for one conversation at a
// time; records other than base and rec are not read or written.
func ShareTail(rec, base *CompileRecord, tip *ShareTip) {
	if rec == nil {
		return
	}
	var bs []SentMessage
	var bk []KeptBlock
	if base != nil {
		bs, bk = base.Sent, base.Kept
	}
	ns := commonSent(rec.Sent, bs)
	nk := commonKept(rec.Kept, bk)
	sent := shareSent(rec.Sent, bs, ns, tip.sent)
	kept := shareKept(rec.Kept, bk, nk, tip.kept)
	// rec's own slices end at its length: an append to them elsewhere
	// copies instead of writing where the next record will (only tip
	// keeps the room)
	rec.Sent, rec.Kept = slices.Clip(sent), slices.Clip(kept)
	tip.sent, tip.kept = sent, kept
}

func commonSent(a, b []SentMessage) int {
	n := 0
	for n < len(a) && n < len(b) && a[n].Orig == b[n].Orig && a[n].Frame == b[n].Frame &&
		(a[n].Blocks == nil) == (b[n].Blocks == nil) && slices.Equal(a[n].Blocks, b[n].Blocks) {
		n++
	}
	return n
}

func commonKept(a, b []KeptBlock) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// extends reports whether base (a prefix of n elements shared) is exactly
// what tip holds: the same array, the same length, all of it shared.
func extends[E any](base, tip []E, n int) bool {
	return n > 0 && n == len(base) && len(base) == len(tip) && &base[0] == &tip[0]
}

func shareSent(own, base []SentMessage, n int, tip []SentMessage) []SentMessage {
	var out []SentMessage
	if extends(base, tip, n) {
		out = tip // append writes past every other record's length
	} else {
		out = make([]SentMessage, 0, len(own))
		out = append(out, base[:n]...)
	}
	// The new messages' blocks, out of the decision's scratch array (which
	// holds every message's): one small array of their own.
	nb := 0
	for _, m := range own[n:] {
		nb += len(m.Blocks)
	}
	blocks := make([]uint64, 0, nb)
	for _, m := range own[n:] {
		if m.Blocks != nil {
			at := len(blocks)
			blocks = append(blocks, m.Blocks...)
			m.Blocks = blocks[at:len(blocks):len(blocks)]
		}
		out = append(out, m)
	}
	return sameNil(out, own)
}

func shareKept(own, base []KeptBlock, n int, tip []KeptBlock) []KeptBlock {
	var out []KeptBlock
	if extends(base, tip, n) {
		out = tip
	} else {
		out = make([]KeptBlock, 0, len(own))
		out = append(out, base[:n]...)
	}
	out = append(out, own[n:]...)
	return sameNil(out, own)
}

// sameNil is out, nil exactly when own is (a record's empty Sent or Kept
// stays as the decision made it).
func sameNil[E any](out, own []E) []E {
	switch {
	case len(out) > 0:
		return out
	case own == nil:
		return nil
	}
	return own[:0:0]
}
