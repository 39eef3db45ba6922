package watcher

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
		// an upper bound of what appendReply writes for b
		switch string(b.typ) {
		case "thinking":
			n += len(b.thinking) + len(b.sig) + 48
		case "text":
			n += len(b.text) + 32
		case "toolCall":
			n += len(b.id) + len(b.name) + len(b.args) + 48
		default:
			n += len(b.whole) + 1
		}
	}
	return appendReply(make([]byte, 0, n), blocks)
}

func appendReply(dst []byte, blocks []replyBlock) []byte {
	dst = append(dst, `{"role":"assistant","content":[`...)
	n := 0
	next := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	str := func(s []byte) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		dst = append(dst, '"')
	}
	value := func(v []byte, empty string) {
		if len(v) == 0 {
			v = []byte(empty)
		}
		dst = append(dst, v...)
	}
	for _, b := range blocks {
		switch {
		case string(b.typ) == "thinking":
			switch {
			case b.redacted:
				next()
				dst = append(dst, `{"type":"redacted_thinking","data":`...)
				str(b.sig)
				dst = append(dst, '}')
			case blank(b.thinking):
			case blank(b.sig):
				next()
				dst = append(dst, `{"type":"text","text":`...)
				str(b.thinking)
				dst = append(dst, '}')
			default:
				next()
				dst = append(dst, `{"type":"thinking","thinking":`...)
				str(b.thinking)
				dst = append(dst, `,"signature":`...)
				str(b.sig)
				dst = append(dst, '}')
			}
		case string(b.typ) == "text":
			if !blank(b.text) {
				next()
				dst = append(dst, `{"type":"text","text":`...)
				str(b.text)
				dst = append(dst, '}')
			}
		case string(b.typ) == "toolCall":
			next()
			dst = append(dst, `{"type":"tool_use","id":`...)
			value(b.id, `""`)
			dst = append(dst, `,"name":`...)
			value(b.name, `""`)
			dst = append(dst, `,"input":`...)
			value(b.args, `{}`)
			dst = append(dst, '}')
		default:
			next()
			dst = append(dst, b.whole...)
		}
	}
	return append(dst, "]}"...)
}
