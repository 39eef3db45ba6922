package proxy

import (
	"bytes"
	"io"
	"slices"
)

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

// textOpen and textClose wrap a string content into one text block.
const textOpen, textClose = `[{"type":"text","text":`, `}]`

// stringContents are the spans of the messages' contents that are
// strings, ascending: what the daemon is shown as text blocks.
func stringContents(body []byte, els []span) ([]span, error) {
	var out []span
	for _, m := range els {
		c, ok, err := member(body, m, "content")
		if err != nil {
			return nil, err
		}
		if ok && body[c.start] == '"' {
			out = append(out, c)
		}
	}
	return out, nil
}

// writeShown writes to w what the daemon is shown of b[from:to]: its bytes
// with each string content in wraps (ascending, in b's offsets) written as
// one text block. A wrap lies within a message, and from and to are never
// inside one, so the daemon's form of a run of messages is written without
// building the whole body again (a 1 MB copy on every turn).
func writeShown(w io.Writer, b []byte, from, to int, wraps []span) {
	i, _ := slices.BinarySearchFunc(wraps, from, func(s span, at int) int { return s.start - at })
	at := from
	for ; i < len(wraps) && wraps[i].end <= to; i++ {
		c := wraps[i]
		w.Write(b[at:c.start])
		io.WriteString(w, textOpen)
		w.Write(b[c.start:c.end])
		io.WriteString(w, textClose)
		at = c.end
	}
	w.Write(b[at:to])
}

// shownBody is body as the daemon is shown it (wraps: stringContents),
// or body itself when no message has string content.
func shownBody(body []byte, wraps []span) []byte {
	if len(wraps) == 0 {
		return body
	}
	out := bytes.NewBuffer(make([]byte, 0, len(body)+len(wraps)*(len(textOpen)+len(textClose))))
	writeShown(out, body, 0, len(body), wraps)
	return out.Bytes()
}
