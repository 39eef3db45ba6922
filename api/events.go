package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// EventLog is the durable, bounded event log the feed replays from.
type EventLog interface {
	// EventBounds returns the oldest seq still stored (0 when the log is
	// empty) and the last seq ever assigned (seqs never repeat).
	EventBounds(ctx context.Context) (oldest, last int64, err error)
	// EventsAfter returns up to limit events with seq > after, in seq
	// order, of one conversation ("" for all).
	EventsAfter(ctx context.Context, after int64, conversation string, limit int) ([]Event, error)
}

// EventFeed serves GET /v1/events: a websocket of JSON events, each in its
// own text message. ?since=SEQ replays the durable log after SEQ before
// going live; ?conversation= filters.
type EventFeed struct {
	Hub          *Hub
	Log          EventLog
	WriteTimeout time.Duration // per message; 0 means 5s
	// MaxID bounds the ?conversation= filter (0: DefaultLimits.ID).
	MaxID  int
	Logger *slog.Logger
}

const backlogPage = 512

// ServeHTTP implements the feed. The subscription is made before the
// handshake answers and before the backlog is read, and live events already
// replayed are skipped by seq: nothing committed is missed and nothing is
// sent twice.
func (f *EventFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	conversation := q.Get("conversation")
	maxID := f.MaxID
	if maxID <= 0 {
		maxID = DefaultLimits.ID
	}
	if len(conversation) > maxID {
		writeFeedError(w, http.StatusBadRequest, CodeLimitExceeded, fmt.Sprintf("events: \"conversation\" is %d bytes; the limit is %d (--max-id)", len(conversation), maxID))
		return
	}
	since := int64(-1)
	if s := q.Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeFeedError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("since=%q: want a non-negative event seq", s))
			return
		}
		since = n
	}
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := f.WriteTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}

	// Subscribed before the handshake answers: a client whose dial has
	// returned is sent every event committed after that, so a host that
	// connects, then acts, sees its own events (subscribing after the
	// answer lost the events of that moment to a live client).
	sub := f.Hub.Subscribe(conversation)
	defer f.Hub.Unsubscribe(sub)

	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		log.Debug("events: websocket accept", "err", err)
		return
	}
	defer c.CloseNow()
	// The feed is write-only: CloseRead answers pings and closes, and its
	// context ends when the client goes away.
	ctx := c.CloseRead(context.Background())

	send := func(b []byte) error {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, b)
	}

	last := int64(0)
	if since >= 0 {
		last = since
		oldest, newest, err := f.Log.EventBounds(ctx)
		if err != nil {
			log.Error("events: log bounds", "err", err)
			c.Close(websocket.StatusInternalError, "bindery: event log unavailable")
			return
		}
		var reset *Event
		switch {
		case since > newest:
			// A seq this log never assigned: the client followed another
			// database. Everything it has is suspect; start it afresh.
			reset = &Event{Seq: newest, Type: EventReset, Conversation: conversation,
				Fields: mustFields(map[string]any{"since": since, "oldest": oldest, "last": newest,
					"reason": "since is ahead of this daemon's log (another database?)"})}
			last = newest
		case oldest > 0 && since < oldest-1:
			reset = &Event{Seq: oldest - 1, Type: EventReset, Conversation: conversation,
				Fields: mustFields(map[string]any{"since": since, "oldest": oldest, "last": newest,
					"lost": oldest - 1 - since, "reason": "events after since were pruned from the log"})}
		case oldest == 0 && since < newest:
			reset = &Event{Seq: newest, Type: EventReset, Conversation: conversation,
				Fields: mustFields(map[string]any{"since": since, "oldest": oldest, "last": newest,
					"lost": newest - since, "reason": "events after since were pruned from the log"})}
		}
		if reset != nil {
			reset.Time = time.Now()
			b, _ := reset.AppendJSON(nil)
			if err := send(b); err != nil {
				return
			}
		}
		// Page through the backlog: no read transaction stays open while
		// the client is slow.
		for {
			page, err := f.Log.EventsAfter(ctx, last, conversation, backlogPage)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("events: backlog", "err", err)
					c.Close(websocket.StatusInternalError, "bindery: event log unavailable")
				}
				return
			}
			for _, e := range page {
				b, err := e.AppendJSON(nil)
				if err != nil {
					log.Error("events: encode", "seq", e.Seq, "err", err)
					continue
				}
				if err := send(b); err != nil {
					return
				}
				last = e.Seq
			}
			if len(page) < backlogPage {
				break
			}
		}
	}

	// behind is the close of a subscriber the hub dropped. It is checked
	// before every send: a writer that was blocked on a slow client must
	// close with the reason as soon as it can write again, not keep
	// sending what is queued (a select would pick at random) until a
	// write times out and cuts the connection with no close frame at all.
	behind := func() {
		reason := fmt.Sprintf("subscriber fell behind: %d events buffered; resume with ?since=%d", f.Hub.buffer, last)
		log.Info("events: closing the feed of a subscriber that fell behind", "reason", reason)
		c.Close(websocket.StatusPolicyViolation, reason)
	}
	for {
		select {
		case <-sub.lagged:
			behind()
			return
		default:
		}
		select {
		case e := <-sub.c:
			if e.seq <= last {
				continue // already replayed from the log
			}
			if err := send(e.data); err != nil {
				switch {
				case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
					// Nothing, not even a close frame, can reach a client
					// that has not read for this long: the connection is
					// cut (the client sees 1006 and resumes with since).
					log.Warn("events: cut a subscriber that read nothing for the --feed-stall time", "stall", timeout, "last", last)
				case ctx.Err() == nil:
					log.Debug("events: write", "err", err)
				}
				return
			}
			last = e.seq
		case <-sub.lagged:
			behind()
			return
		case <-sub.done:
			c.Close(websocket.StatusGoingAway, "bindery: shutting down; reconnect with ?since="+strconv.FormatInt(last, 10))
			return
		case <-ctx.Done():
			return
		}
	}
}

func mustFields(m map[string]any) json.RawMessage {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // only called with plain values
	}
	return b
}

func writeFeedError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
