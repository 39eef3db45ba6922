package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/api/jsonscan"
)

// reply assembles the assistant message from a copy of the response's
// server-sent events, as the SDKs' accumulators do (research/gateways.md,
// section 4): each block from its content_block_start, thinking_delta and
// text_delta appended, signature_delta taken, input_json_delta gathered and
// parsed at content_block_stop; usage from message_start, then
// message_delta's (cumulative); input_transformations from message_start,
// or from the last message_delta that carries them (after a mid-stream
// fallback, the serving model's). A reply is complete only at
// message_stop; an error event, a malformed event or a reply over its
// bound makes it unusable, and nothing is accepted.
type reply struct {
	max  int // bound on the bytes the reply's blocks hold
	size int

	blocks  []map[string]any
	partial map[int]*bytes.Buffer // input_json_delta by block index
	// text and thinking deltas by block index, joined by accept
	// (appending to the block's string would copy it at every delta: a
	// long reply's text is thousands of deltas)
	texts   map[int]*textParts
	usage   map[string]any
	trans   json.RawMessage
	started bool
	stopped bool
	failed  error
}

func newReply(max int) *reply { return &reply{max: max} }

// event takes one server-sent event's type and data.
func (r *reply) event(typ string, data []byte) {
	if r.failed != nil || r.stopped {
		return
	}
	switch typ {
	case "ping", "":
		return
	case "error":
		r.failed = fmt.Errorf("the stream carried an error event: %.300s", data)
		return
	}
	if typ == "content_block_delta" {
		// Most of a stream: read in place (encoding/json would check and
		// decode each delta twice, and a long reply is thousands of them).
		r.size += len(data)
		if r.size > r.max {
			r.failed = fmt.Errorf("the reply is over %d bytes: not accepted", r.max)
			return
		}
		r.fastDelta(data)
		return
	}
	var ev struct {
		Type         string          `json:"type"`
		Index        *int            `json:"index"`
		Message      json.RawMessage `json:"message"`
		ContentBlock json.RawMessage `json:"content_block"`
		Delta        json.RawMessage `json:"delta"`
		Usage        json.RawMessage `json:"usage"`
		Trans        json.RawMessage `json:"input_transformations"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		r.failed = fmt.Errorf("event %q: %w", typ, err)
		return
	}
	r.size += len(data)
	if r.size > r.max {
		r.failed = fmt.Errorf("the reply is over %d bytes: not accepted", r.max)
		return
	}
	switch ev.Type {
	case "message_start":
		var m struct {
			Usage map[string]any  `json:"usage"`
			Trans json.RawMessage `json:"input_transformations"`
		}
		if err := decodeNumbers(ev.Message, &m); err != nil {
			r.failed = fmt.Errorf("message_start: %w", err)
			return
		}
		r.started, r.usage = true, m.Usage
		if isList(m.Trans) {
			r.trans = m.Trans
		}
	case "content_block_start":
		var b map[string]any
		if ev.Index == nil || decodeNumbers(ev.ContentBlock, &b) != nil || b == nil {
			r.failed = errors.New("content_block_start without an index or a block")
			return
		}
		if *ev.Index != len(r.blocks) {
			r.failed = fmt.Errorf("content_block_start index %d after %d blocks", *ev.Index, len(r.blocks))
			return
		}
		r.blocks = append(r.blocks, b)
	case "content_block_delta":
		if ev.Index == nil || *ev.Index < 0 || *ev.Index >= len(r.blocks) {
			r.failed = errors.New("content_block_delta for a block never started")
			return
		}
		r.delta(*ev.Index, ev.Delta)
	case "content_block_stop":
		if ev.Index == nil || *ev.Index < 0 || *ev.Index >= len(r.blocks) {
			r.failed = errors.New("content_block_stop for a block never started")
			return
		}
		// Text and thinking are joined by accept, after the stream: a long
		// block's join (megabytes copied) held back the events after it.
		if p := r.partial[*ev.Index]; p != nil {
			var in any
			if err := decodeNumbers(p.Bytes(), &in); err != nil {
				r.failed = fmt.Errorf("block %d: input_json_delta is not JSON: %w", *ev.Index, err)
				return
			}
			r.blocks[*ev.Index]["input"] = in
			delete(r.partial, *ev.Index)
		}
	case "message_delta":
		var u map[string]any
		if len(ev.Usage) > 0 && decodeNumbers(ev.Usage, &u) == nil {
			if r.usage == nil {
				r.usage = map[string]any{}
			}
			for k, v := range u {
				r.usage[k] = v
			}
		}
		if isList(ev.Trans) {
			r.trans = ev.Trans
		}
	case "message_stop":
		r.stopped = r.started
		if !r.started {
			r.failed = errors.New("message_stop without message_start")
		}
	}
}

// delta applies one content_block_delta; an unknown delta type leaves the
// block as it started (its value then differs from what the client
// replays, which costs that reply's later thinking a strip, never a
// refusal).
func (r *reply) delta(i int, raw json.RawMessage) {
	var d struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Partial   string `json:"partial_json"`
		Citation  any    `json:"citation"`
	}
	if err := decodeNumbers(raw, &d); err != nil {
		r.failed = fmt.Errorf("block %d: delta: %w", i, err)
		return
	}
	switch d.Type {
	case "text_delta":
		r.apply(i, "text", d.Text)
	case "thinking_delta":
		r.apply(i, "thinking", d.Thinking)
	case "signature_delta":
		r.apply(i, "signature", d.Signature)
	case "input_json_delta":
		r.apply(i, "partial_json", d.Partial)
	case "citations_delta":
		cs, _ := r.blocks[i]["citations"].([]any)
		r.blocks[i]["citations"] = append(cs, d.Citation)
	}
}

// fastDelta applies a content_block_delta event read in place: its index
// and its delta's text, thinking, signature or partial_json string.
// Anything else (a citation, a delta type it does not know) goes through
// delta, decoded.
func (r *reply) fastDelta(data []byte) {
	all := span{0, len(data)}
	fail := func(why string) { r.failed = fmt.Errorf("content_block_delta: %s", why) }
	is, ok, err := member(data, all, "index")
	if err != nil || !ok {
		fail("no index")
		return
	}
	i, err := strconv.Atoi(string(data[is.start:is.end]))
	if err != nil || i < 0 || i >= len(r.blocks) {
		fail("for a block never started")
		return
	}
	ds, ok, err := member(data, all, "delta")
	if err != nil || !ok || data[ds.start] != '{' {
		fail("no delta")
		return
	}
	ts, ok, err := member(data, ds, "type")
	if err != nil || !ok {
		fail("a delta without a type")
		return
	}
	field := ""
	switch string(data[ts.start:ts.end]) {
	case `"text_delta"`:
		field = "text"
	case `"thinking_delta"`:
		field = "thinking"
	case `"signature_delta"`:
		field = "signature"
	case `"input_json_delta"`:
		field = "partial_json"
	default:
		r.delta(i, data[ds.start:ds.end])
		return
	}
	vs, ok, err := member(data, ds, field)
	if err != nil || !ok || data[vs.start] != '"' || vs.end-vs.start < 2 {
		fail("a " + field + " that is not a string")
		return
	}
	v, err := jsonscan.Unescape(data[vs.start+1 : vs.end-1])
	if err != nil {
		fail(err.Error())
		return
	}
	r.apply(i, field, v)
}

// apply takes one delta's value for block i: text and thinking are
// gathered (joined by accept), the signature taken, a tool
// input's JSON gathered (parsed at the block's stop).
func (r *reply) apply(i int, field, v string) {
	switch field {
	case "text":
		p := r.parts(i)
		p.text = append(p.text, v)
	case "thinking":
		p := r.parts(i)
		p.thinking = append(p.thinking, v)
	case "signature":
		r.blocks[i]["signature"] = v
	case "partial_json":
		if r.partial == nil {
			r.partial = map[int]*bytes.Buffer{}
		}
		p := r.partial[i]
		if p == nil {
			p = &bytes.Buffer{}
			r.partial[i] = p
		}
		p.WriteString(v)
	}
}

// textParts gathers a block's text and thinking deltas as they came (each
// already its own string), joined once, by accept, after the stream: a
// builder would copy the text again each time it grew, and one growing
// buffer costs fresh pages at each doubling (measured: the stream ran at
// half the speed). Small strings reuse the heap's spans.
type textParts struct{ text, thinking []string }

func (r *reply) parts(i int) *textParts {
	if r.texts == nil {
		r.texts = map[int]*textParts{}
	}
	p := r.texts[i]
	if p == nil {
		p = &textParts{}
		r.texts[i] = p
	}
	return p
}

// join writes block i's gathered deltas after what it started with.
func (r *reply) join(i int) {
	p := r.texts[i]
	if p == nil {
		return
	}
	b := r.blocks[i]
	if len(p.text) > 0 {
		s, _ := b["text"].(string)
		b["text"] = s + strings.Join(p.text, "")
	}
	if len(p.thinking) > 0 {
		s, _ := b["thinking"].(string)
		b["thinking"] = s + strings.Join(p.thinking, "")
	}
	delete(r.texts, i)
}

// complete says whether the reply can be accepted.
func (r *reply) complete() bool { return r.failed == nil && r.stopped }

// accept is the accept call for the compile: the assembled message, its
// usage and the transformations the response reported.
func (r *reply) accept(compileID string) (*api.AcceptCall, error) {
	for i := range r.blocks {
		r.join(i) // a block the stream never stopped
	}
	msg, err := marshal(map[string]any{"role": "assistant", "content": r.blocks})
	if err != nil {
		return nil, fmt.Errorf("compile %s: the reply: %w", compileID, err)
	}
	call := &api.AcceptCall{CompileID: compileID, Reply: msg}
	if r.usage != nil {
		if call.Usage, err = marshal(r.usage); err != nil {
			return nil, fmt.Errorf("compile %s: the usage: %w", compileID, err)
		}
	}
	if r.trans != nil {
		if err := json.Unmarshal(r.trans, &call.InputTransformations); err != nil {
			return nil, fmt.Errorf("compile %s: input_transformations: %w", compileID, err)
		}
		if call.InputTransformations == nil {
			call.InputTransformations = []api.InputTransformation{}
		}
	}
	return call, nil
}

// decodeNumbers decodes keeping numbers as their literal text.
func decodeNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// marshal encodes without HTML escaping (the daemon compares values, but
// a reply read back should look like what the provider sent).
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func isList(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '['
}
