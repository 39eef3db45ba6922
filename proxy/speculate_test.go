package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

func TestAhead(t *testing.T) {
	body := []byte("0123456789abcdefghij")
	cases := []struct {
		name         string
		last         sentAs
		body         []byte
		spans        []span
		size, length int
	}{
		{"no history", sentAs{}, body, nil, 0, 20},
		{"the same body, no cuts: all but its last byte",
			sentAs{body: body}, body, []span{{0, 19}}, 19, 20},
		{"the same body, a cut: the cut's bytes are not sent",
			sentAs{body: body, cuts: []span{{2, 5}}}, body, []span{{0, 2}, {5, 19}}, 16, 17},
		{"a longer body: the shared bytes, the last cuts out",
			sentAs{body: body[:12], cuts: []span{{0, 1}, {3, 4}}}, body, []span{{1, 3}, {4, 12}}, 10, 18},
		{"a body that differs at 8: up to 8",
			sentAs{body: []byte("01234567XXXXXXXXXXXX"), cuts: []span{{2, 3}, {9, 12}}}, body, []span{{0, 2}, {3, 8}}, 7, 19},
		{"a cut across the first difference: up to the cut",
			sentAs{body: []byte("01234567XXXXXXXXXXXX"), cuts: []span{{6, 10}}}, body, []span{{0, 6}}, 6, 20},
		{"a cut from the first difference: up to it",
			sentAs{body: []byte("01234567XXXXXXXXXXXX"), cuts: []span{{8, 10}}}, body, []span{{0, 8}}, 8, 20},
		{"nothing shared", sentAs{body: []byte("X")}, body, nil, 0, 20},
		{"an empty body", sentAs{body: body}, nil, nil, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spans, size, length := ahead(c.body, c.last)
			if !equalSpans(spans, c.spans) || size != c.size || length != c.length {
				t.Errorf("ahead = %v, %d, %d; want %v, %d, %d", spans, size, length, c.spans, c.size, c.length)
			}
			if len(c.body) > 0 && size >= length {
				t.Errorf("%d bytes sent ahead of %d: the bytes ahead would complete a request", size, length)
			}
		})
	}
}

func equalSpans(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCommonPrefix(t *testing.T) {
	a := bytes.Repeat([]byte("abcdefgh"), 10000)
	for _, at := range []int{0, 1, 63, 64, 65, 4095, 40000, len(a) - 1} {
		b := bytes.Clone(a)
		b[at] = 'X'
		if got := commonPrefix(a, b); got != at {
			t.Errorf("differing at %d: commonPrefix = %d", at, got)
		}
	}
	if got := commonPrefix(a, a[:100]); got != 100 {
		t.Errorf("a prefix of 100: commonPrefix = %d", got)
	}
}

// recorder is an upstream that records the bodies it read whole and
// counts those cut short of their length.
type recorder struct {
	mu         sync.Mutex
	bodies     [][]byte
	incomplete int
	started    chan struct{} // closed when the first request's headers are read
	once       sync.Once
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.once.Do(func() { close(rc.started) })
	b, err := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.incomplete++
		return
	}
	rc.bodies = append(rc.bodies, b)
	w.Write([]byte("{}"))
}

func (rc *recorder) seen() ([][]byte, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([][]byte(nil), rc.bodies...), rc.incomplete
}

// speculationCase is a proxy whose history's last request was body0 with
// its thinking block cut, and the next turn's body (body0 and a new user
// message), over aheadMin.
func speculationCase(t *testing.T) (*Proxy, *recorder, []byte, []byte) {
	rc := &recorder{started: make(chan struct{})}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	p, err := New(Config{Upstream: srv.URL, Client: api.NewClient(filepath.Join(t.TempDir(), "none.sock"))})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 150<<10)
	msgs := `[{"role":"user","content":"` + long + `"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"a"}]}`
	body0 := []byte(`{"model":"m","messages":` + msgs + `],"max_tokens":1}`)
	body1 := []byte(`{"model":"m","messages":` + msgs + `,{"role":"user","content":"next"}],"max_tokens":1}`)
	arr, els, err := messageSpans(body0)
	if err != nil {
		t.Fatal(err)
	}
	cuts, err := planCuts(body0, arr, els, []api.Strip{{Path: "messages.1.content.0"}}, nil)
	if err != nil || len(cuts) != 1 {
		t.Fatalf("cuts %v, %v", cuts, err)
	}
	p.bases.putSent("k", "c_1", body0, els, nil, nil, sentAs{body: body0, cuts: cuts})
	return p, rc, body0, body1
}

// cutThinking is body with its thinking block cut, as compile sends it:
// the pieces of body around the cut.
func cutThinking(t *testing.T, body []byte) spliced {
	arr, els, err := messageSpans(body)
	if err != nil {
		t.Fatal(err)
	}
	cuts, err := planCuts(body, arr, els, []api.Strip{{Path: "messages.1.content.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return splice(body, cuts)
}

// TestSpeculationSendsOnlyTheCompiledBody: whatever the compile decides,
// the upstream reads one complete body, and it is the compiled one; a
// request sent ahead on a wrong prediction is cut short of its length
// (the upstream reads no request) and the caller sends the body whole.
func TestSpeculationSendsOnlyTheCompiledBody(t *testing.T) {
	cases := []struct {
		name  string
		final func(t *testing.T, body1 []byte) spliced
		ahead bool // the request sent ahead completes
	}{
		{"the same cut: completed ahead", cutThinking, true},
		{"nothing cut (the daemon failed open): abandoned", func(_ *testing.T, b []byte) spliced { return whole(b) }, false},
		{"the same length, one byte other: abandoned", func(t *testing.T, b []byte) spliced {
			out := bytes.Clone(cutThinking(t, b).bytes())
			out[100] = 'y'
			return whole(out)
		}, false},
		{"the same length, the last byte sent ahead other: abandoned", func(t *testing.T, b []byte) spliced {
			out := bytes.Clone(cutThinking(t, b).bytes())
			end := []byte(`"text":"a"}]}`)
			out[bytes.Index(out, end)+len(end)-1] = ' '
			return whole(out)
		}, false},
		{"the same length, a byte after those sent ahead other: completed ahead", func(t *testing.T, b []byte) spliced {
			out := bytes.Clone(cutThinking(t, b).bytes())
			out[len(out)-1] = ' '
			return whole(out)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, rc, _, body1 := speculationCase(t)
			r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
			r.Header.Set("x-api-key", "k")
			s := p.speculate(context.Background(), r, "k", body1)
			if s == nil {
				t.Fatal("nothing sent ahead")
			}
			// The request is on its way (the upstream has its headers)
			// before the compile answers, so an abandoned one is cut short
			// in the upstream's sight, not before it was sent.
			<-rc.started
			final := c.final(t, body1)
			resp, err, ok := s.finish(final)
			if ok != c.ahead {
				t.Fatalf("finish: ok = %v, want %v (err %v)", ok, c.ahead, err)
			}
			if !ok {
				if resp, err = p.send(context.Background(), r, &final); err != nil {
					t.Fatal(err)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := 0
			if !c.ahead {
				want = 1
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				bodies, incomplete := rc.seen()
				if incomplete == want || time.Now().After(deadline) {
					if len(bodies) != 1 || !bytes.Equal(bodies[0], final.bytes()) {
						t.Errorf("the upstream read %d complete bodies; want one, the compiled one", len(bodies))
					}
					if incomplete != want {
						t.Errorf("%d bodies cut short; want %d", incomplete, want)
					}
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestSpeculationClientGone: a request whose client leaves during its
// compile is abandoned: the upstream reads nothing whole.
func TestSpeculationClientGone(t *testing.T) {
	p, rc, _, body1 := speculationCase(t)
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	ctx, cancel := context.WithCancel(context.Background())
	s := p.speculate(ctx, r, "k", body1)
	if s == nil {
		t.Fatal("nothing sent ahead")
	}
	<-rc.started
	cancel()
	s.abandon()
	deadline := time.Now().Add(10 * time.Second)
	for {
		bodies, incomplete := rc.seen()
		if len(bodies) != 0 {
			t.Fatalf("the upstream read %d bodies whole", len(bodies))
		}
		if incomplete == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request abandoned was not cut short in the upstream's sight")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
