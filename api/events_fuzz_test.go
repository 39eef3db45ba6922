package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"testing"
)

// FuzzEventsQuery: any query on GET /v1/events is either refused with a
// JSON 400 naming the parameter, or goes on to the websocket handshake
// (which a plain request then fails); it never panics. A since that is a
// non-negative integer and a conversation within the id bound are taken.
//
//	go test -run XX -fuzz FuzzEventsQuery -fuzztime 30s ./api
func FuzzEventsQuery(f *testing.F) {
	for _, q := range []string{"", "since=0", "since=-1", "since=x", "conversation=a&since=5", "conversation=" + string(make([]byte, 300)), "since=99999999999999999999", "%zz"} {
		f.Add(q)
	}
	s := &Server{Events: &EventFeed{Hub: NewHub(0, nil), MaxID: 64}, Health: fakeHealth{}, Sessions: &fakeSessions{}, UID: os.Getuid()}
	h := s.Handler()
	ctx := WithPeer(context.Background(), Peer{UID: uint32(os.Getuid())}, nil)
	f.Fuzz(func(t *testing.T, q string) {
		req := httptest.NewRequestWithContext(ctx, "GET", "http://bindery/v1/events", nil)
		req.URL.RawQuery = q
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		vals, perr := url.ParseQuery(q)
		conv, since := vals.Get("conversation"), vals.Get("since")
		n, serr := strconv.ParseInt(since, 10, 64)
		good := len(conv) <= 64 && (since == "" || (serr == nil && n >= 0))
		if rec.Code == http.StatusBadRequest && json.Valid(rec.Body.Bytes()) {
			var eb struct{ Error Error }
			json.Unmarshal(rec.Body.Bytes(), &eb)
			if good && perr == nil && eb.Error.Code != "" {
				t.Fatalf("query %q refused: %s", q, rec.Body.Bytes())
			}
			return
		}
		if !good && perr == nil {
			t.Fatalf("query %q (conversation %d bytes, since %q) not refused: %d %q", q, len(conv), since, rec.Code, rec.Body.Bytes())
		}
	})
}
