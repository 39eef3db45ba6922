package watcher

import (
	"bytes"
	"fmt"
)

// pi's assistant entry as the provider's wire shape. A reply holding signed
// thinking is what the binding hook attributes when its accept did not come
// (design/binding.md, "Reply seen only in the session file"); its digests
// must be what the next request will carry, so it is converted the way pi's
// Anthropic serializer converts it (pi-sessions.md 5.3):
//
//	thinking with a signature -> thinking{thinking, signature}
//	thinking marked redacted  -> redacted_thinking{data: its signature}
//	blank thinking            -> dropped
//	unsigned thinking         -> text{text: the thinking}
//	blank text                -> dropped
//	toolCall                  -> tool_use{id, name, input: arguments, or {}}
//	any other block           -> as written
//
// Strings are copied as written (escapes and all): binding's digests are of
// decoded values, so the copy digests as a re-encoding would, and the line
// is read and scanned once. The reply is the entry as written, never
// through a context_edit of it: a stamp binds a block to what the model saw
// when it minted the block. An edit changes what later requests carry of
// the reply; the next compile judges that against these stamps.

// On pi's Bedrock route (api bedrock-converse-stream) the next request
// carries the reply in Bedrock Converse's shape, the way pi's Converse
// serializer converts it (bedrock-converse-stream.js, convertMessages):
//
//	thinking with a signature -> reasoningContent{reasoningText{text, signature}}
//	thinking marked redacted  -> reasoningContent{redactedContent: its signature (the bytes' base64)}
//	blank thinking            -> dropped (signed or not)
//	unsigned thinking         -> {text: the thinking}
//	blank text                -> dropped
//	toolCall                  -> toolUse{toolUseId: id, name, input: arguments, or {}}
//	any other block           -> dropped
//
// (pi also drops members with an empty key from a tool call's arguments;
// such an argument makes the copy digest differently, so the block is
// stripped, never sent stale.)

// A reply is built only when it is asked for (ReadReply), not by every
// parse: it is read rarely (an assistant message with signed thinking whose
// accept did not come, in a session bindery compiled for), while on a first
// scan of an archive the replies of every assistant message were about a
// third of what the ingest allocated, and none was read.

// MaxLineLimit is the largest Config.MaxLineBytes the daemon accepts
// (--max-line-bytes), and so the bound on the line ReadReply reads.
const MaxLineLimit = 1 << 30

// ReadReply reads the entry of the session file at path whose line starts
// at offset and is length bytes long, its newline included (what an
// Entry's Offset and Length say), and parses it with its Reply. It reads
// what the file holds now: the caller checks that the entry is the one it
// means (by its signed thinking blocks). A line of a v1 file gets no id
// (ids there come from the line's place among the file's values).
func ReadReply(path string, offset int64, length int) (*Entry, error) {
	if offset < 0 || length <= 0 || length > MaxLineLimit {
		return nil, fmt.Errorf("reply at %s:%d: a line of %d bytes is outside 1..%d", path, offset, length, MaxLineLimit)
	}
	f, _, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("reply at %s:%d: %w", path, offset, err)
	}
	defer f.Close()
	line := make([]byte, length)
	if _, err := f.ReadAt(line, offset); err != nil {
		return nil, fmt.Errorf("reply at %s:%d: read %d bytes: %w", path, offset, length, err)
	}
	if bytes.IndexByte(line, '\n') != len(line)-1 {
		return nil, fmt.Errorf("reply at %s:%d: the %d bytes there are not one complete line (the file changed)", path, offset, length)
	}
	p := &Parser{Path: path, State: ParseState{Version: 2, Values: 1}, replies: true}
	e := &Entry{}
	if res, kept := p.lineInto(line, offset, e); !kept {
		if res.Err != nil {
			return nil, fmt.Errorf("reply at %s:%d: %s", path, offset, res.Err.Reason)
		}
		return nil, fmt.Errorf("reply at %s:%d: the line holds no entry", path, offset)
	}
	return e, nil
}

// converseAPI is pi's api name for its Bedrock Converse route.
const converseAPI = "bedrock-converse-stream"

// replyBlock is one content block of an assistant message: spans of the
// session line.
type replyBlock struct {
	whole               []byte // the block's JSON
	typ, text, thinking []byte // string contents, as written
	sig                 []byte // thinkingSignature, as written
	redacted            bool
	id, name, args      []byte // JSON values
}

// signedReply is e's reply in wire shape when e holds signed thinking (nil
// otherwise: nothing needs it).
func signedReply(e *Entry, blocks []replyBlock) []byte {
	signed := false
	for _, t := range e.Thinking {
		signed = signed || t.Signed
	}
	if !signed {
		return nil
	}
	n := len(`{"role":"assistant","content":[]}`)
	for _, b := range blocks {
		// an upper bound of what either shape writes for b
		switch string(b.typ) {
		case "thinking":
			n += len(b.thinking) + len(b.sig) + 64
		case "text":
			n += len(b.text) + 32
		case "toolCall":
			n += len(b.id) + len(b.name) + len(b.args) + 64
		default:
			n += len(b.whole) + 1
		}
	}
	w := &wireWriter{dst: make([]byte, 0, n)}
	if e.API == converseAPI {
		return w.converse(blocks)
	}
	return w.messages(blocks)
}

// wireWriter writes one reply: {"role":"assistant","content":[...]}.
type wireWriter struct {
	dst []byte
	n   int // blocks written
}

// block starts a block: the separator, then the block's opening text.
func (w *wireWriter) block(open string) {
	if w.n > 0 {
		w.dst = append(w.dst, ',')
	}
	w.n++
	w.dst = append(w.dst, open...)
}

func (w *wireWriter) raw(s string) { w.dst = append(w.dst, s...) }

// str writes a string's contents, as written, quoted.
func (w *wireWriter) str(s []byte) {
	w.dst = append(w.dst, '"')
	w.dst = append(w.dst, s...)
	w.dst = append(w.dst, '"')
}

// value writes a JSON value, or empty when there is none.
func (w *wireWriter) value(v []byte, empty string) {
	if len(v) == 0 {
		w.raw(empty)
		return
	}
	w.dst = append(w.dst, v...)
}

// messages writes the reply as pi's Anthropic serializer does.
func (w *wireWriter) messages(blocks []replyBlock) []byte {
	w.raw(`{"role":"assistant","content":[`)
	for _, b := range blocks {
		switch string(b.typ) {
		case "thinking":
			switch {
			case b.redacted:
				w.block(`{"type":"redacted_thinking","data":`)
				w.str(b.sig)
				w.raw(`}`)
			case blank(b.thinking):
			case blank(b.sig):
				w.block(`{"type":"text","text":`)
				w.str(b.thinking)
				w.raw(`}`)
			default:
				w.block(`{"type":"thinking","thinking":`)
				w.str(b.thinking)
				w.raw(`,"signature":`)
				w.str(b.sig)
				w.raw(`}`)
			}
		case "text":
			if !blank(b.text) {
				w.block(`{"type":"text","text":`)
				w.str(b.text)
				w.raw(`}`)
			}
		case "toolCall":
			w.block(`{"type":"tool_use","id":`)
			w.value(b.id, `""`)
			w.raw(`,"name":`)
			w.value(b.name, `""`)
			w.raw(`,"input":`)
			w.value(b.args, `{}`)
			w.raw(`}`)
		default:
			w.block("")
			w.dst = append(w.dst, b.whole...)
		}
	}
	w.raw("]}")
	return w.dst
}

// converse writes the reply as pi's Bedrock Converse serializer does.
func (w *wireWriter) converse(blocks []replyBlock) []byte {
	w.raw(`{"role":"assistant","content":[`)
	for _, b := range blocks {
		switch string(b.typ) {
		case "thinking":
			switch {
			case b.redacted:
				if len(b.sig) > 0 {
					w.block(`{"reasoningContent":{"redactedContent":`)
					w.str(b.sig)
					w.raw(`}}`)
				}
			case blank(b.thinking):
			case blank(b.sig):
				w.block(`{"text":`)
				w.str(b.thinking)
				w.raw(`}`)
			default:
				w.block(`{"reasoningContent":{"reasoningText":{"text":`)
				w.str(b.thinking)
				w.raw(`,"signature":`)
				w.str(b.sig)
				w.raw(`}}}`)
			}
		case "text":
			if !blank(b.text) {
				w.block(`{"text":`)
				w.str(b.text)
				w.raw(`}`)
			}
		case "toolCall":
			w.block(`{"toolUse":{"toolUseId":`)
			w.value(b.id, `""`)
			w.raw(`,"name":`)
			w.value(b.name, `""`)
			w.raw(`,"input":`)
			w.value(b.args, `{}`)
			w.raw(`}}`)
		}
	}
	w.raw("]}")
	return w.dst
}
