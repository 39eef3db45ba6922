package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// acceptHosts is how many conversations accept at once: sixteen hosts,
// each with its own client (one pi process, one keep-alive connection).
const acceptHosts = 16

// BenchmarkConcurrentAccepts: 16 conversations accepting at once over the
// real socket, against the simplest baseline in the same run: raw
// transactions of 16 single-row inserts (the journal's own prepared event
// insert), each a synced commit (db.Synced: synchronous=FULL, WAL) on a
// db.Open'ed database in the same directory. Raw and daemon work
// alternate inside every iteration, so the machine's noise falls on both.
//
//   - accepts: each round, the 16 hosts compile (not timed: a turn's
//     compile is made before its reply exists), then all 16 accept at
//     once; only the accept phase is timed. accepts/s against raw-rows/s
//     is the ratio.
//   - turns: the hosts run compile, accept, compile, ... freely, as hosts
//     do; turns/s counts whole turns (a compile's commit is deferred, its
//     accept's syncs both), timed by the wall clock.
//   - echo: the transport's floor. The same 16 hosts each POST an
//     accept-sized body to a server on a Unix socket that only reads it
//     and answers; ratio is calls/s against raw-rows/s. What an accept
//     may cost beyond this, for the accepts ratio to reach a given value,
//     is bindery's own work.
//
// writes/commit and writes/fsync are the journal's (Journal.Stats): how
// many calls shared a transaction, and a synced one.
func BenchmarkConcurrentAccepts(b *testing.B) {
	b.Run("accepts", func(b *testing.B) {
		e := newBindingEnv(b, nil)
		raw := openRawBaseline(b)
		hosts := newAcceptHosts(b, e)
		round := 0
		var rawDur, accDur, accCPU time.Duration
		var acc JournalStats // the accept phases'
		before := e.j.Stats()
		for b.Loop() {
			round++
			rawDur += raw.commit(b)
			ids := make([]string, len(hosts))
			runHosts(b, hosts, func(h *acceptHost) error {
				id, err := h.compile()
				ids[h.i] = id
				return err
			})
			s0 := e.j.Stats()
			c0 := processCPU()
			t0 := time.Now()
			runHosts(b, hosts, func(h *acceptHost) error { return h.accept(ids[h.i], round) })
			accDur += time.Since(t0)
			accCPU += processCPU() - c0
			acc = acc.add(e.j.Stats().Sub(s0))
		}
		st := e.j.Stats().Sub(before)
		rows := float64(acceptHosts*round) / rawDur.Seconds()
		accepts := float64(acceptHosts*round) / accDur.Seconds()
		b.ReportMetric(rows, "raw-rows/s")
		b.ReportMetric(accepts, "accepts/s")
		b.ReportMetric(accepts/rows, "ratio")
		st.report(b)
		b.ReportMetric(float64(acc.Synced)/float64(round), "fsyncs/round")
		// The process's CPU in the accept phases (hosts and daemon alike,
		// both in this process), per accept: on a 2-core machine the
		// accepts/s a round's CPU allows is 2 cores / this, whatever the
		// other agents' load does to the wall clock.
		b.ReportMetric(float64(accCPU.Microseconds())/float64(acceptHosts*round), "cpu-µs/accept")
	})
	b.Run("echo", func(b *testing.B) {
		echoAccepts(b)
	})
	b.Run("turns", func(b *testing.B) {
		e := newBindingEnv(b, nil)
		raw := openRawBaseline(b)
		hosts := newAcceptHosts(b, e)
		// The baseline before and after the hosts' run, as many rows as
		// turns the run makes.
		var rawDur time.Duration
		for range (b.N + 2*acceptHosts - 1) / (2 * acceptHosts) {
			rawDur += raw.commit(b)
		}
		before := e.j.Stats()
		per := (b.N + acceptHosts - 1) / acceptHosts
		t0 := time.Now()
		runHosts(b, hosts, func(h *acceptHost) error {
			for i := range per {
				id, err := h.compile()
				if err != nil {
					return err
				}
				if err := h.accept(id, i); err != nil {
					return err
				}
			}
			return nil
		})
		wall := time.Since(t0)
		st := e.j.Stats().Sub(before)
		for range (b.N + 2*acceptHosts - 1) / (2 * acceptHosts) {
			rawDur += raw.commit(b)
		}
		rawRows := float64(acceptHosts * ((b.N + 2*acceptHosts - 1) / (2 * acceptHosts)) * 2)
		rows := rawRows / rawDur.Seconds()
		turns := float64(acceptHosts*per) / wall.Seconds()
		b.ReportMetric(rows, "raw-rows/s")
		b.ReportMetric(turns, "turns/s")
		b.ReportMetric(turns/rows, "ratio")
		st.report(b)
	})
}

func (s JournalStats) add(o JournalStats) JournalStats {
	return JournalStats{Writes: s.Writes + o.Writes, Commits: s.Commits + o.Commits, Synced: s.Synced + o.Synced}
}

func (s JournalStats) report(b *testing.B) {
	if s.Commits > 0 {
		b.ReportMetric(float64(s.Writes)/float64(s.Commits), "writes/commit")
	}
	if s.Synced > 0 {
		b.ReportMetric(float64(s.Writes)/float64(s.Synced), "writes/fsync")
	}
}

// rawBaseline is the simplest durable batch: one synced transaction of
// acceptHosts single-row inserts.
type rawBaseline struct{ d *db.DB }

func openRawBaseline(b *testing.B) rawBaseline {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "raw.db"), db.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return rawBaseline{d}
}

func (r rawBaseline) commit(b *testing.B) time.Duration {
	t0 := time.Now()
	err := r.d.WriteAs(context.Background(), db.Synced, func(ctx context.Context, tx *db.Tx) error {
		for range acceptHosts {
			if _, err := tx.AppendEvent(ctx, "raw", "raw", json.RawMessage(`{}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// acceptHost is one host: its conversation and its own client.
type acceptHost struct {
	i      int
	conv   string
	body   []byte
	client *api.Client
}

func newAcceptHosts(b *testing.B, e *bindingEnv) []*acceptHost {
	hosts := make([]*acceptHost, acceptHosts)
	for i := range hosts {
		conv := fmt.Sprint("acc", i)
		c := api.NewClient(e.sock)
		b.Cleanup(func() { c.Close() })
		hosts[i] = &acceptHost{i: i, conv: conv, body: request(conv, 3, 100), client: c}
	}
	return hosts
}

func (h *acceptHost) compile() (string, error) {
	ans, err := h.client.Compile(context.Background(), &api.CompileCall{Conversation: h.conv, Request: h.body, Return: api.ReturnPlan})
	if err != nil {
		return "", err
	}
	return ans.CompileID, nil
}

func (h *acceptHost) accept(id string, turn int) error {
	_, err := h.client.Accept(context.Background(), &api.AcceptCall{CompileID: id, Reply: reply(fmt.Sprintf("a-%d-%d", h.i, turn))})
	return err
}

// runHosts runs fn for every host at once and waits for all of them.
func runHosts(b *testing.B, hosts []*acceptHost, fn func(h *acceptHost) error) {
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(func() {
			if err := fn(h); err != nil {
				b.Errorf("host %d (%s): %v", h.i, h.conv, err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// echoAccepts is the echo case: HTTP over a Unix socket, keep-alive, one
// client per host, and nothing behind the handler.
func echoAccepts(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "echo")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"compile_id":"c","stamped":1}`))
	}), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	b.Cleanup(func() { hs.Close() })
	raw := openRawBaseline(b)
	clients := make([]*http.Client, acceptHosts)
	for i := range clients {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
		b.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr}
	}
	// An accept's body in the accepts case: the compile id and the reply.
	body, err := json.Marshal(&api.AcceptCall{CompileID: "c-0123456789abcdef", Reply: reply("a-0-0")})
	if err != nil {
		b.Fatal(err)
	}
	rounds := 0
	var rawDur, dur, cpu time.Duration
	for b.Loop() {
		rounds++
		rawDur += raw.commit(b)
		c0 := processCPU()
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				resp, err := c.Post("http://bindery/v1/accept", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("echo: %s", resp.Status)
				}
			})
		}
		wg.Wait()
		dur += time.Since(t0)
		cpu += processCPU() - c0
	}
	n := float64(acceptHosts * rounds)
	b.ReportMetric(n/rawDur.Seconds(), "raw-rows/s")
	b.ReportMetric(n/dur.Seconds(), "calls/s")
	b.ReportMetric(rawDur.Seconds()/dur.Seconds(), "ratio")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/call")
}
