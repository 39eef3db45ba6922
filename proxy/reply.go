package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/my-pi/bindery/api"
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
	b := r.blocks[i]
	switch d.Type {
	case "text_delta":
		s, _ := b["text"].(string)
		b["text"] = s + d.Text
	case "thinking_delta":
		s, _ := b["thinking"].(string)
		b["thinking"] = s + d.Thinking
	case "signature_delta":
		b["signature"] = d.Signature
	case "input_json_delta":
		if r.partial == nil {
			r.partial = map[int]*bytes.Buffer{}
		}
		p := r.partial[i]
		if p == nil {
			p = &bytes.Buffer{}
			r.partial[i] = p
		}
		p.WriteString(d.Partial)
	case "citations_delta":
		cs, _ := b["citations"].([]any)
		b["citations"] = append(cs, d.Citation)
	}
}

// complete says whether the reply can be accepted.
func (r *reply) complete() bool { return r.failed == nil && r.stopped }

// accept is the accept call for the compile: the assembled message, its
// usage and the transformations the response reported.
func (r *reply) accept(compileID string) (*api.AcceptCall, error) {
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
