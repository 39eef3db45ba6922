package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// Compile is POST /v1/compile.
//
// The request goes out as the caller's bytes, spliced into the call:
// json.Marshal would compact a json.RawMessage and escape <, > and & in it
// as \u003c, \u003e and \u0026, and the daemon answers with the bytes it
// was given, so an unstripped request would no longer come back byte for
// byte as the host wrote it (api.md).
func (c *Client) Compile(ctx context.Context, call *CompileCall) (*CompileAnswer, error) {
	body, err := compileBody(call)
	if err != nil {
		return nil, fmt.Errorf("POST /v1/compile: encode body: %w", err)
	}
	var ans CompileAnswer
	if err := c.Do(ctx, http.MethodPost, "/v1/compile", body, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// compileBody encodes call with its Request copied in verbatim.
func compileBody(call *CompileCall) (json.RawMessage, error) {
	head := *call
	head.Request = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	if len(call.Request) == 0 {
		return b, nil
	}
	// Request is CompileCall's last field, so a nil one ends the object.
	const null = `"request":null}`
	if !bytes.HasSuffix(b, []byte(null)) {
		return nil, fmt.Errorf("compile call does not end with %s", null)
	}
	out := make([]byte, 0, len(b)+len(call.Request))
	out = append(out, b[:len(b)-len("null}")]...)
	out = append(out, call.Request...)
	return append(out, '}'), nil
}

// Accept is POST /v1/accept. The reply goes out as the caller's bytes,
// spliced into the call as Compile's request is: json.Marshal would
// validate and compact a json.RawMessage, a second pass over a reply that
// can run to megabytes (bindery proxy accepts every streamed reply).
func (c *Client) Accept(ctx context.Context, call *AcceptCall) (*AcceptAnswer, error) {
	body, err := acceptBody(call)
	if err != nil {
		return nil, fmt.Errorf("POST /v1/accept: encode body: %w", err)
	}
	var ans AcceptAnswer
	if err := c.Do(ctx, http.MethodPost, "/v1/accept", body, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// acceptBody encodes call with its Reply copied in verbatim (the daemon
// reads the body with json.Unmarshal, which validates it).
func acceptBody(call *AcceptCall) (json.RawMessage, error) {
	head := *call
	head.Reply = nil
	b, err := json.Marshal(&head)
	if err != nil || len(call.Reply) == 0 {
		return b, err
	}
	out := make([]byte, 0, len(b)+len(call.Reply)+len(`,"reply":`))
	out = append(out, b[:len(b)-1]...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"reply":`...)
	out = append(out, call.Reply...)
	return append(out, '}'), nil
}

// Release is POST /v1/release.
func (c *Client) Release(ctx context.Context, call *ReleaseCall) (*ReleaseAnswer, error) {
	var ans ReleaseAnswer
	if err := c.Do(ctx, http.MethodPost, "/v1/release", call, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// Conversation is GET /v1/conversations/{id}.
func (c *Client) Conversation(ctx context.Context, id string) (*ConversationState, error) {
	var st ConversationState
	if err := c.Do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(id), nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Conversations is GET /v1/conversations.
func (c *Client) Conversations(ctx context.Context) ([]ConversationSummary, error) {
	var l ConversationList
	if err := c.Do(ctx, http.MethodGet, "/v1/conversations", nil, &l); err != nil {
		return nil, err
	}
	return l.Conversations, nil
}

// EventsOptions selects what Events streams.
type EventsOptions struct {
	Conversation string // "" for every conversation
	Since        int64  // replay events after this seq first (with HasSince)
	HasSince     bool
}

// EventStream is a live GET /v1/events feed. Next returns events in seq
// order; after an error the stream is over: reconnect with Since set to
// the last seq seen (the error says why the daemon ended it).
type EventStream struct {
	conn *websocket.Conn
	Last int64 // seq of the last event returned
}

// Events opens the event feed.
func (c *Client) Events(ctx context.Context, opt EventsOptions) (*EventStream, error) {
	if err := c.init(); err != nil {
		return nil, err
	}
	q := url.Values{}
	if opt.Conversation != "" {
		q.Set("conversation", opt.Conversation)
	}
	if opt.HasSince {
		q.Set("since", strconv.FormatInt(opt.Since, 10))
	}
	u := "ws://bindery/v1/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	socket := c.Socket
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		if isNotRunning(err) {
			return nil, &NotRunningError{Socket: c.Socket, Err: err}
		}
		if resp != nil && resp.StatusCode/100 != 2 {
			return nil, &Error{Code: CodeBadRequest, Status: resp.StatusCode, Message: fmt.Sprintf("events: %v", err)}
		}
		return nil, fmt.Errorf("events via %s: %w", c.Socket, err)
	}
	conn.SetReadLimit(16 << 20)
	return &EventStream{conn: conn, Last: opt.Since}, nil
}

// FeedEndedError is the daemon ending the feed: Reason is the close
// frame's reason (api/doc.go lists them: a shutdown, a reader too slow to
// keep up), or its status when it gave none.
type FeedEndedError struct {
	Reason string
	Err    error
}

func (e *FeedEndedError) Error() string { return "feed ended: " + e.Reason }
func (e *FeedEndedError) Unwrap() error { return e.Err }

// Next waits for the next event. A ctx that ends closes the stream (the
// websocket library closes a connection whose read is abandoned). The
// daemon closing the feed is a *FeedEndedError.
func (s *EventStream) Next(ctx context.Context) (Event, error) {
	_, b, err := s.conn.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			reason := ce.Reason
			if reason == "" {
				reason = ce.Code.String()
			}
			return Event{}, &FeedEndedError{Reason: reason, Err: err}
		}
		return Event{}, err
	}
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("event %.100s: %w", b, err)
	}
	e.Raw = b
	if e.Seq > s.Last || e.Type == EventReset {
		s.Last = e.Seq
	}
	return e, nil
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.conn.Close(websocket.StatusNormalClosure, "") }
