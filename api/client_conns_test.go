package api

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// countingListener counts the connections the server accepts: each is a
// dial of the client's.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// 16 goroutines sharing one Client, round after round, reuse their
// connections: the pool keeps them all (at net/http's default of 2 idle
// per host, 14 were closed after each round and dialed again).
func TestClientConcurrentCallersReuseConnections(t *testing.T) {
	s, _ := testServer()
	ln, err := net.Listen("unix", filepath.Join(shortDir(t), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := &http.Server{Handler: s.Handler(), ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		p, err := selfPeer(c)
		return WithPeer(ctx, p, err)
	}}
	go srv.Serve(cl)
	t.Cleanup(func() { srv.Close() })

	const callers, rounds = 16, 40
	c := NewClient(ln.Addr().String())
	defer c.Close()
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Health(t.Context()); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	// A connection finishing its call goes back to the pool a moment after
	// the call returns, so a round may dial for a connection still on its
	// way back; the pool keeps that one too. At most callers in use plus
	// callers on their way back: 2*callers dials over all rounds, where
	// the default pool dials about (callers-2)*rounds.
	if got := cl.accepted.Load(); got > 2*callers {
		t.Fatalf("%d callers x %d rounds dialed %d connections, want at most %d", callers, rounds, got, 2*callers)
	}
}
