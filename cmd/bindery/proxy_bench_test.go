package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding/judgetest"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

// The proxy's cost, as ratios against the simplest baseline in the same
// run: the same request straight to the same upstream. Figures go in the
// issue's note; nothing here asserts a time.

// benchHistory builds, straight against the upstream, a tool-loop history
// of about size bytes whose thinking blocks the upstream minted, and
// returns the host holding it with a new user prompt at its end.
func benchHistory(b *testing.B, up *upstreamtest.Upstream, size int) *apiHost {
	h := newAPIHost(b, up.URL, "claude-opus-5-5")
	h.top["stream"] = true
	pad := strings.Repeat("x", 2000)
	for len(h.body()) < size {
		h.user("next step " + pad)
		h.turn()
		if id := h.lastToolID(); id != "" {
			h.toolResult(id, pad+pad)
		}
	}
	h.user("and now?")
	return h
}

// ttfb sends body to base and returns the time to the answer's first byte,
// then reads the rest.
func ttfb(b *testing.B, base string, hdr http.Header, body []byte) time.Duration {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
	req.Header = hdr.Clone()
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, one); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return d
}

// benchProxyProc starts a real daemon, a test upstream answering with
// reply, and the proxy as users run it: a real `bindery proxy` process
// (its own heap and garbage collector, apart from the test's client and
// upstream), with its metrics served; cleanup is the benchmark's.
func benchProxyProc(b *testing.B, reply func(int, []byte) []judgetest.ReplyBlock) (up *upstreamtest.Upstream, addr string, client *api.Client, metrics string) {
	e := newE2EB(b)
	e.serveB(b)
	up, err := upstreamtest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	up.SetReply(reply)
	client = api.NewClient(e.sock)
	b.Cleanup(client.Close)
	pe := &proxyE2E{e2e: e, up: up}
	pe.startProxyTB(b, "--metrics", "127.0.0.1:0")
	return up, pe.addr, client, pe.metrics
}

// compileSeconds is the proxy's bindery_proxy_compile_seconds sum and
// count: the compile calls as the proxy made and waited for them.
func compileSeconds(b *testing.B, metrics string) (sum float64, count int) {
	sum = metricValue(b, metrics, "bindery_proxy_compile_seconds_sum")
	return sum, int(metricValue(b, metrics, "bindery_proxy_compile_seconds_count"))
}

// metricValue is one series' value in the proxy's metrics (0 if absent).
func metricValue(b *testing.B, metrics, series string) float64 {
	resp, err := http.Get(metrics)
	if err != nil {
		b.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var v float64
	for _, l := range strings.Split(string(text), "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			fmt.Sscan(rest, &v)
		}
	}
	return v
}

// acceptsDone waits until the proxy has finished want accepts (its
// bindery_proxy_accepts_total, any result): a reply's accept runs after the
// reply, off the client's path, and a benchmark that timed the next
// request at once would charge it to whichever path came next.
func acceptsDone(b *testing.B, metrics string, want int) {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(metrics)
		if err != nil {
			b.Fatal(err)
		}
		text, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := 0
		for _, l := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(l, "bindery_proxy_accepts_total{") {
				var v float64
				fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
				got += int(v)
			}
		}
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the proxy finished %d accepts of %d in a minute", got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// plainHop is the simplest gateway in front of upstream: it reads the
// client's body whole, then forwards it and copies the answer back,
// flushing each read (as an SSE gateway must). What it costs over the
// direct path is any such hop's on this machine, not the proxy's.
func plainHop(b *testing.B, upstream string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return
				}
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkProxyTTFB: time to first byte through the proxy against
// straight to the upstream, for a 10 KB and a 1 MB request, each turn
// alternating the two; and the daemon's full compile of the same request
// (the proxy's turns compile by reference), and the compile as the proxy
// made it (its own metric: by reference, recorded before it answers), so
// the proxy's own overhead is added-beyond-compile-µs; and a plain hop
// (plainHop: what any gateway that must read the body before sending it
// pays, the body crossing loopback twice), so own-µs is what is left once
// the hop and the proxy's compile are taken out. All in one run.
func BenchmarkProxyTTFB(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKB", size>>10), func(b *testing.B) {
			up, addr, client, metrics := benchProxyProc(b, func(n int, body []byte) []judgetest.ReplyBlock {
				return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "tool_use", ID: fmt.Sprintf("toolu_%d", n), Name: "read", Input: map[string]any{"path": "a"}}}
			})
			hop := plainHop(b, up.URL)
			h := benchHistory(b, up, size)
			body := h.body()
			ttfb(b, addr, h.header, body) // the first compile is in full
			accepts := 1
			acceptsDone(b, metrics, accepts)
			sum0, count0 := compileSeconds(b, metrics)
			var direct, through, plain, compile time.Duration
			for i := 0; b.Loop(); i++ {
				// Which path goes first alternates: whatever the turn
				// before left running (the accept, the daemon's writes)
				// is charged to each alike.
				viaProxy := func() {
					through += ttfb(b, addr, h.header, body)
					accepts++
					acceptsDone(b, metrics, accepts)
				}
				if i%2 == 0 {
					direct += ttfb(b, up.URL, h.header, body)
					viaProxy()
				} else {
					viaProxy()
					direct += ttfb(b, up.URL, h.header, body)
				}
				plain += ttfb(b, hop.URL, h.header, body)
				t0 := time.Now()
				if _, err := client.Compile(context.Background(), &api.CompileCall{Conversation: "bench-full", DryRun: true, Return: api.ReturnPlan, Request: body}); err != nil {
					b.Fatal(err)
				}
				compile += time.Since(t0)
			}
			n := float64(b.N)
			sum1, count1 := compileSeconds(b, metrics)
			// the share of the proxy's requests sent ahead of their compile
			// and completed (speculate.go); 1 MB only, over its threshold
			b.ReportMetric(metricValue(b, metrics, `bindery_proxy_sent_ahead_total{outcome="completed"}`)/n, "ahead-completed/op")
			proxyCompile := (sum1 - sum0) / float64(count1-count0) * 1e6
			added := float64((through - direct).Microseconds()) / n
			b.ReportMetric(proxyCompile, "proxy-compile-µs")
			b.ReportMetric(added-proxyCompile, "added-beyond-compile-µs")
			b.ReportMetric(float64(len(body))/1024, "request-KB")
			b.ReportMetric(float64(direct.Microseconds())/n, "direct-µs")
			b.ReportMetric(float64(through.Microseconds())/n, "proxy-µs")
			b.ReportMetric(float64((through-direct).Microseconds())/n, "added-µs")
			b.ReportMetric(float64(compile.Microseconds())/n, "full-compile-µs")
			b.ReportMetric(float64((plain-direct).Microseconds())/n, "hop-µs")
			b.ReportMetric(float64((through-plain).Microseconds())/n-proxyCompile, "own-µs")
			b.ReportMetric(float64(through)/float64(direct), "proxy/direct")
		})
	}
}

// BenchmarkProxyStream: a long reply (4 MB of text in 4 KB deltas)
// streamed through the proxy against straight from the upstream, and
// through the plain hop, in one run. Two throughputs each: the whole
// request (compile and first byte included), and the stream itself, first
// byte to last (what "streaming throughput" means; the first byte's cost
// is BenchmarkProxyTTFB's).
func BenchmarkProxyStream(b *testing.B) {
	long := strings.Repeat("All work and no play makes a long reply. ", 100000)
	up, addr, _, metrics := benchProxyProc(b, func(int, []byte) []judgetest.ReplyBlock {
		return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "text", Text: long}}
	})
	up.SetDeltaSize(4096)
	hop := plainHop(b, up.URL)
	h := newAPIHost(b, up.URL, "claude-opus-5-5")
	h.user("write a lot")
	body := h.body()
	type took struct{ all, stream time.Duration }
	read := func(base string) (took, int64) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
		req.Header = h.header.Clone()
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		one := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, one); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return took{time.Since(t0), time.Since(t1)}, n + 1
	}
	var direct, through, plain took
	var bytesRead int64
	add := func(t *took, d took) { t.all += d.all; t.stream += d.stream }
	accepts := 0
	for i := 0; b.Loop(); i++ {
		// Which path goes first alternates, as in BenchmarkProxyTTFB.
		viaProxy := func() {
			t, _ := read(addr)
			add(&through, t)
			accepts++
			acceptsDone(b, metrics, accepts)
		}
		if i%2 == 1 {
			viaProxy()
		}
		d, n := read(up.URL)
		add(&direct, d)
		if i%2 == 0 {
			viaProxy()
		}
		p, _ := read(hop.URL)
		add(&plain, p)
		bytesRead = n
	}
	b.SetBytes(bytesRead)
	mbs := func(d time.Duration) float64 { return float64(bytesRead) / 1e6 / (d.Seconds() / float64(b.N)) }
	b.ReportMetric(mbs(direct.all), "direct-MB/s")
	b.ReportMetric(mbs(through.all), "proxy-MB/s")
	b.ReportMetric(direct.all.Seconds()/through.all.Seconds(), "proxy/direct-throughput")
	b.ReportMetric(direct.stream.Seconds()/through.stream.Seconds(), "proxy/direct-stream")
	b.ReportMetric(direct.stream.Seconds()/plain.stream.Seconds(), "hop/direct-stream")
	b.ReportMetric(plain.stream.Seconds()/through.stream.Seconds(), "proxy/hop-stream")
}

// BenchmarkProxyMemory: the proxy's resident memory (its own process)
// while one long reply streams, and while 16 do at once, each in a proxy
// just started (a process keeps the heap it grew, so a second measure in
// the same one would read the first's). Bounded per stream (the side copy
// keeps a reply's blocks for its accept, never the stream, and no more
// than --max-reply), and flat across concurrent streams: each of 16 costs
// no more than one alone.
func BenchmarkProxyMemory(b *testing.B) {
	e := newE2EB(b)
	e.serveB(b)
	up, err := upstreamtest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	long := strings.Repeat("a reply that is long but not kept whole ", 25000) // 1 MB
	up.SetReply(func(_ int, body []byte) []judgetest.ReplyBlock {
		if bytes.Contains(body, []byte("warm up")) {
			return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "text", Text: "short"}}
		}
		return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "text", Text: long}}
	})
	up.SetDeltaSize(4096)
	stream := func(addr string, i int) {
		h := newAPIHost(b, addr, "claude-opus-5-5")
		h.header.Set("X-Session-Id", fmt.Sprintf("mem_%d", i))
		if i < 0 {
			h.user("warm up")
		} else {
			h.user(fmt.Sprintf("stream %d", i))
		}
		req, _ := http.NewRequest(http.MethodPost, addr+"/v1/messages", bytes.NewReader(h.body()))
		req.Header = h.header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// peak runs n streams at once through a proxy just started, and
	// returns its resident memory before them and its peak.
	peak := func(n int) (idle, top int64) {
		pe := &proxyE2E{e2e: e, up: up}
		pe.startProxyTB(b, "--metrics", "127.0.0.1:0")
		stream(pe.addr, -1) // the process warmed (the daemon's salt, its pools) by a short reply
		acceptsDone(b, pe.metrics, 1)
		pid := pe.proxy.Process.Pid
		idle, _ = procMem(pid)
		// The peak so far is reset to what is resident now (proc(5),
		// clear_refs: 5).
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			b.Fatalf("resetting the proxy's peak memory: %v", err)
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); stream(pe.addr, i) }()
		}
		wg.Wait()
		acceptsDone(b, pe.metrics, 1+n)
		_, top = procMem(pid)
		pe.proxy.Process.Kill()
		<-pe.done
		return idle, top
	}
	var idle1, one, idle16, sixteen int64
	for b.Loop() {
		i, o := peak(1)
		j, s := peak(16)
		idle1, one, idle16, sixteen = idle1+i, one+o, idle16+j, sixteen+s
	}
	mb := func(v int64) float64 { return float64(v) / float64(b.N) / (1 << 20) }
	b.ReportMetric(mb(idle1), "idle-rss-MB")
	b.ReportMetric(mb(one), "peak-rss-1-MB")
	b.ReportMetric(mb(sixteen), "peak-rss-16-MB")
	b.ReportMetric(mb(one-idle1), "per-stream-alone-MB")
	b.ReportMetric(mb(sixteen-idle16)/16, "per-stream-of-16-MB")
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
