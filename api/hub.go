package api

import (
	"log/slog"
	"sync"
)

// DefaultSubscriberBuffer is how many events a feed client may be behind
// before it is disconnected (it resumes with ?since=).
const DefaultSubscriberBuffer = 1024

// Hub fans live events out to feed subscribers. Publish never blocks: a
// subscriber whose queue is full is dropped (and told so), never awaited,
// so a client that stops reading cannot stall the daemon or anyone else.
//
// Events must be published in seq order; the daemon publishes right after
// the commit that assigned their seq, under the same writer lock.
type Hub struct {
	mu     sync.Mutex
	subs   map[*Subscriber]struct{}
	buffer int
	closed bool
	log    *slog.Logger
}

// NewHub returns a hub whose subscribers may queue buffer events (0 means
// DefaultSubscriberBuffer).
func NewHub(buffer int, log *slog.Logger) *Hub {
	if buffer <= 0 {
		buffer = DefaultSubscriberBuffer
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{subs: make(map[*Subscriber]struct{}), buffer: buffer, log: log}
}

// Subscriber is one live feed. C delivers events; Lagged is closed when
// the subscriber was dropped for falling behind, Done when the hub closed.
type Subscriber struct {
	conversation string
	c            chan wireEvent
	lagged       chan struct{}
	done         chan struct{}
}

// wireEvent is an event with its wire bytes encoded once for every client.
type wireEvent struct {
	seq  int64
	data []byte
}

// Subscribe registers a live subscriber for events of one conversation
// ("" for all). Call Unsubscribe when done.
func (h *Hub) Subscribe(conversation string) *Subscriber {
	s := &Subscriber{
		conversation: conversation,
		c:            make(chan wireEvent, h.buffer),
		lagged:       make(chan struct{}),
		done:         make(chan struct{}),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.done)
		return s
	}
	h.subs[s] = struct{}{}
	return s
}

// Unsubscribe removes s; it is safe to call more than once.
func (h *Hub) Unsubscribe(s *Subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Subscribers returns how many live subscribers the hub has.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Publish delivers events to every matching subscriber without blocking.
func (h *Hub) Publish(events ...Event) {
	if len(events) == 0 {
		return
	}
	wire := make([]wireEvent, 0, len(events))
	convs := make([]string, 0, len(events))
	for _, e := range events {
		b, err := e.AppendJSON(nil)
		if err != nil {
			h.log.Error("event not published", "seq", e.Seq, "type", e.Type, "err", err)
			continue
		}
		wire = append(wire, wireEvent{seq: e.Seq, data: b})
		convs = append(convs, e.Conversation)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		for i, w := range wire {
			if s.conversation != "" && s.conversation != convs[i] {
				continue
			}
			select {
			case s.c <- w:
			default:
				// Dropping one event silently would leave a client that
				// believes it is current with a gap: drop the client.
				delete(h.subs, s)
				close(s.lagged)
				h.log.Warn("events: a subscriber fell behind and is dropped; its feed closes with the reason once it can be written", "buffered", h.buffer, "conversation", s.conversation)
			}
			if _, ok := h.subs[s]; !ok {
				break
			}
		}
	}
}

// Close ends every subscription (the feeds close with "going away") and
// refuses new ones.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for s := range h.subs {
		close(s.done)
		delete(h.subs, s)
	}
}
