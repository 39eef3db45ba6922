package binding

import "sort"

// Rewrite returns body with the content blocks for which strip(msg, block)
// is true and the messages for which drop(msg) is true cut out of their
// arrays, and every other byte exactly as the host wrote it. r must be the
// Request parsed from body; indices are original. Either function may be nil
// (nothing of that kind is removed).
//
// Each removed element takes one neighbouring separator with it: the comma
// (and whitespace) that followed it, or, for elements after the last kept one,
// the comma that preceded it. When every element goes, the array keeps its
// brackets and the whitespace inside them. A kept message whose blocks are
// all stripped keeps an empty content array: dropping it is the caller's
// decision (pass it to drop). When nothing is removed, body itself is
// returned; otherwise a new slice.
func Rewrite(body []byte, r *Request, strip func(msg, block int) bool, drop func(msg int) bool) []byte {
	var cuts []Span
	var msgSpans, blockSpans []Span
	var msgGone, blockGone []bool
	for i := range r.Messages {
		msgSpans = append(msgSpans, r.Messages[i].Span)
		gone := drop != nil && drop(i)
		msgGone = append(msgGone, gone)
		if gone || strip == nil || len(r.Messages[i].Blocks) == 0 {
			continue
		}
		blockSpans, blockGone = blockSpans[:0], blockGone[:0]
		for j := range r.Messages[i].Blocks {
			blockSpans = append(blockSpans, r.Messages[i].Blocks[j].Span)
			blockGone = append(blockGone, strip(i, j))
		}
		cuts = appendCuts(cuts, blockSpans, blockGone)
	}
	cuts = appendCuts(cuts, msgSpans, msgGone)
	if len(cuts) == 0 {
		return body
	}
	sort.Slice(cuts, func(a, b int) bool { return cuts[a].Start < cuts[b].Start })
	n := len(body)
	for _, c := range cuts {
		n -= c.End - c.Start
	}
	out := make([]byte, 0, n)
	at := 0
	for _, c := range cuts {
		out = append(out, body[at:c.Start]...)
		at = c.End
	}
	return append(out, body[at:]...)
}

// appendCuts appends the byte ranges to remove from an array whose elements
// are at spans, removing those marked gone. The ranges are disjoint and lie
// between the first element's start and the last element's end.
func appendCuts(cuts []Span, spans []Span, gone []bool) []Span {
	n := len(spans)
	first, last := -1, -1
	for i := range n {
		if !gone[i] {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		if n > 0 {
			cuts = append(cuts, Span{spans[0].Start, spans[n-1].End})
		}
		return cuts
	}
	if first > 0 {
		// Elements before the first kept one go with the separators after them.
		cuts = append(cuts, Span{spans[0].Start, spans[first].Start})
	}
	prev := first
	for i := first + 1; i <= last; i++ {
		if gone[i] {
			continue
		}
		if i > prev+1 {
			// Keep the separator after the previous kept element; cut from
			// the first removed element to the next kept one.
			cuts = append(cuts, Span{spans[prev+1].Start, spans[i].Start})
		}
		prev = i
	}
	if last < n-1 {
		cuts = append(cuts, Span{spans[last].End, spans[n-1].End})
	}
	return cuts
}
