package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Event types on GET /v1/events (api.md). Every event carries seq, time,
// type and conversation; the rest of its fields depend on the type.
const (
	EventCompile      = "compile"              // compileId, branch, dryRun, engaged, thinkingStripped, thinkingKept, strips, droppedMessages, cache
	EventStrip        = "strip"                // compileId, branch, path, reason, tokens (one per strip of a real compile)
	EventAccept       = "accept"               // compileId, branch, stamped, released, repeated
	EventRelease      = "release"              // branch, compileId, path or signature, released, source
	EventEngage       = "engage"               // branch, compileId, parent
	EventStampSkipped = "stamp-skipped"        // branch, compileId, path, reason
	EventSession      = "session"              // change (found|grew|rewritten|removed), file, entries
	EventIngestError  = "ingest-error"         // file, line, offset, reason
	EventTransform    = "input-transformation" // compileId, branch, transformation, reason, path (as sent), hostPath
	EventStamp        = "stamp"                // entry, source (file|link), stamped or linked: a reply seen landing in a session file
	// EventReset is sent, never stored: the client asked for events older
	// than the log keeps (or from another database), so it missed some.
	EventReset = "reset"
)

// Event is one entry of the event log. Fields is a JSON object holding the
// type-specific fields; on the wire they sit next to seq, time, type and
// conversation in one flat object.
type Event struct {
	Seq          int64
	Time         time.Time
	Type         string
	Conversation string
	Fields       json.RawMessage // a JSON object, or empty
	Raw          []byte          `json:"-"` // the wire form as received (client side)
}

// MarshalJSON writes the flat wire object. The common fields come first so
// a reader can route on them without decoding the rest.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil)
}

// AppendJSON appends the wire form of e to b.
func (e Event) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = strconv.AppendQuote(b, e.Type)
	b = append(b, `,"conversation":`...)
	conv, err := json.Marshal(e.Conversation)
	if err != nil {
		return nil, err
	}
	b = append(b, conv...)
	f := bytes.TrimSpace(e.Fields)
	if len(f) > 0 && !bytes.Equal(f, []byte("{}")) && !bytes.Equal(f, []byte("null")) {
		if f[0] != '{' || f[len(f)-1] != '}' {
			return nil, fmt.Errorf("event %d fields: not a JSON object", e.Seq)
		}
		b = append(b, ',')
		b = append(b, f[1:]...) // the fields' closing brace closes the event
		return b, nil
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the flat wire object back: the common fields into
// their places, everything else into Fields.
func (e *Event) UnmarshalJSON(data []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	*e = Event{}
	if v, ok := all["seq"]; ok {
		if err := json.Unmarshal(v, &e.Seq); err != nil {
			return fmt.Errorf("event seq: %w", err)
		}
	}
	if v, ok := all["time"]; ok {
		if err := json.Unmarshal(v, &e.Time); err != nil {
			return fmt.Errorf("event time: %w", err)
		}
	}
	if v, ok := all["type"]; ok {
		if err := json.Unmarshal(v, &e.Type); err != nil {
			return fmt.Errorf("event type: %w", err)
		}
	}
	if v, ok := all["conversation"]; ok {
		if err := json.Unmarshal(v, &e.Conversation); err != nil {
			return fmt.Errorf("event conversation: %w", err)
		}
	}
	delete(all, "seq")
	delete(all, "time")
	delete(all, "type")
	delete(all, "conversation")
	if len(all) > 0 {
		f, err := json.Marshal(all)
		if err != nil {
			return err
		}
		e.Fields = f
	}
	return nil
}

// Field decodes one type-specific field into v; it reports whether the
// field was present.
func (e Event) Field(name string, v any) (bool, error) {
	if len(e.Fields) == 0 {
		return false, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(e.Fields, &all); err != nil {
		return false, err
	}
	raw, ok := all[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}
