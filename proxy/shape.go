package proxy

// What the daemon is shown: the client's request with every message's
// string content written as one text block ("content":"x" becomes
// "content":[{"type":"text","text":"x"}], the string's bytes kept).
//
// bindery's canonical form tells the two apart (design/binding.md: the
// conservative side, for pi, whose messages never flip), but Claude Code
// sends the message that carries its moving cache breakpoint as a text
// block with cache_control and the same message next turn as a string,
// every turn (research/gateways.md, 2.3). Judged as sent, every thinking
// block after that message would be stripped on every turn. The API
// documents string content as shorthand for one text block and compares
// values, and Claude Code works on accounts that enforce the prefix check,
// which it could not if the flip failed it: the two are one value to the
// provider [INF]. The proxy shows the daemon the one form; the upstream
// still gets the client's bytes, and the plan's paths are the same in both
// (a string content holds no blocks to strip). A reading of the provider
// that tells them apart costs a binding refusal, which the proxy releases
// and retries (retry.go): never a refusal the client sees.

// textBlocks returns body with each message's string content written as
// one text block, or body itself when no message has string content, and
// the messages array's span and its elements' in what it returns (every
// edit lies inside the array: its start stays, its end moves by what was
// added), so the body is scanned once.
func textBlocks(body []byte, arr span, els []span) ([]byte, span, []span, error) {
	type edit struct{ content span }
	var edits []edit
	for _, m := range els {
		c, ok, err := member(body, m, "content")
		if err != nil {
			return nil, span{}, nil, err
		}
		if ok && body[c.start] == '"' {
			edits = append(edits, edit{c})
		}
	}
	if len(edits) == 0 {
		return body, arr, els, nil
	}
	const open, closing = `[{"type":"text","text":`, `}]`
	out := make([]byte, 0, len(body)+len(edits)*(len(open)+len(closing)))
	at := 0
	shift := make([]int, 0, len(edits)) // bytes added before each edit's end
	added := 0
	for _, e := range edits {
		out = append(out, body[at:e.content.start]...)
		out = append(out, open...)
		out = append(out, body[e.content.start:e.content.end]...)
		out = append(out, closing...)
		at = e.content.end
		added += len(open) + len(closing)
		shift = append(shift, added)
	}
	out = append(out, body[at:]...)
	// The messages' spans in the new body: each moves by what was added
	// before it, its own edit included in its end.
	moved := make([]span, len(els))
	k, before := 0, 0
	for i, m := range els {
		start := m.start + before
		for k < len(edits) && edits[k].content.end <= m.end {
			before = shift[k]
			k++
		}
		moved[i] = span{start, m.end + before}
	}
	return out, span{arr.start, arr.end + added}, moved, nil
}
