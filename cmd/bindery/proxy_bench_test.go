package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	resp, err := http.Get(metrics)
	if err != nil {
		b.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, l := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(l, "bindery_proxy_compile_seconds_sum "); ok {
			fmt.Sscan(v, &sum)
		}
		if v, ok := strings.CutPrefix(l, "bindery_proxy_compile_seconds_count "); ok {
			fmt.Sscan(v, &count)
		}
	}
	return sum, count
}

// BenchmarkProxyTTFB: time to first byte through the proxy against
// straight to the upstream, for a 10 KB and a 1 MB request, each turn
// alternating the two; and the daemon's full compile of the same request
// (the proxy's turns compile by reference), and the compile as the proxy
// made it (its own metric: by reference, recorded before it answers), so
// the proxy's own overhead is added-beyond-compile-µs.
func BenchmarkProxyTTFB(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKB", size>>10), func(b *testing.B) {
			up, addr, client, metrics := benchProxyProc(b, func(n int, body []byte) []judgetest.ReplyBlock {
				return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "tool_use", ID: fmt.Sprintf("toolu_%d", n), Name: "read", Input: map[string]any{"path": "a"}}}
			})
			h := benchHistory(b, up, size)
			body := h.body()
			ttfb(b, addr, h.header, body) // the first compile is in full
			sum0, count0 := compileSeconds(b, metrics)
			var direct, through, compile time.Duration
			for b.Loop() {
				direct += ttfb(b, up.URL, h.header, body)
				through += ttfb(b, addr, h.header, body)
				t0 := time.Now()
				if _, err := client.Compile(context.Background(), &api.CompileCall{Conversation: "bench-full", DryRun: true, Return: api.ReturnPlan, Request: body}); err != nil {
					b.Fatal(err)
				}
				compile += time.Since(t0)
			}
			n := float64(b.N)
			sum1, count1 := compileSeconds(b, metrics)
			proxyCompile := (sum1 - sum0) / float64(count1-count0) * 1e6
			added := float64((through - direct).Microseconds()) / n
			b.ReportMetric(proxyCompile, "proxy-compile-µs")
			b.ReportMetric(added-proxyCompile, "added-beyond-compile-µs")
			b.ReportMetric(float64(len(body))/1024, "request-KB")
			b.ReportMetric(float64(direct.Microseconds())/n, "direct-µs")
			b.ReportMetric(float64(through.Microseconds())/n, "proxy-µs")
			b.ReportMetric(float64((through-direct).Microseconds())/n, "added-µs")
			b.ReportMetric(float64(compile.Microseconds())/n, "full-compile-µs")
			b.ReportMetric(float64(through)/float64(direct), "proxy/direct")
		})
	}
}

// BenchmarkProxyStream: a long reply (4 MB of text in 4 KB deltas)
// streamed through the proxy against straight from the upstream: the
// throughput ratio.
func BenchmarkProxyStream(b *testing.B) {
	long := strings.Repeat("All work and no play makes a long reply. ", 100000)
	up, addr, _, _ := benchProxyProc(b, func(int, []byte) []judgetest.ReplyBlock {
		return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "text", Text: long}}
	})
	up.SetDeltaSize(4096)
	h := newAPIHost(b, up.URL, "claude-opus-5-5")
	h.user("write a lot")
	body := h.body()
	read := func(base string) (time.Duration, int64) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
		req.Header = h.header.Clone()
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0), n
	}
	var direct, through time.Duration
	var bytesRead int64
	for b.Loop() {
		d, n := read(up.URL)
		direct += d
		t, _ := read(addr)
		through += t
		bytesRead = n
	}
	b.SetBytes(bytesRead)
	n := float64(b.N)
	b.ReportMetric(float64(bytesRead)/1e6/(direct.Seconds()/n), "direct-MB/s")
	b.ReportMetric(float64(bytesRead)/1e6/(through.Seconds()/n), "proxy-MB/s")
	b.ReportMetric(direct.Seconds()/through.Seconds(), "proxy/direct-throughput")
}

// BenchmarkProxyMemory: the proxy's resident memory (its own process)
// after one long stream, then after 16 at once: bounded per stream, and
// flat across concurrent streams (the side copy keeps a reply's blocks,
// never the stream).
func BenchmarkProxyMemory(b *testing.B) {
	e := newE2EB(b)
	e.serveB(b)
	up, err := upstreamtest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	long := strings.Repeat("a reply that is long but not kept whole ", 25000) // 1 MB
	up.SetReply(func(int, []byte) []judgetest.ReplyBlock {
		return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "text", Text: long}}
	})
	up.SetDeltaSize(4096)
	pe := &proxyE2E{e2e: e, up: up}
	pe.startProxyTB(b)
	stream := func(i int) {
		h := newAPIHost(b, pe.addr, "claude-opus-5-5")
		h.header.Set("X-Session-Id", fmt.Sprintf("mem_%d", i))
		h.user(fmt.Sprintf("stream %d", i))
		req, _ := http.NewRequest(http.MethodPost, pe.addr+"/v1/messages", bytes.NewReader(h.body()))
		req.Header = h.header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for b.Loop() {
		stream(0)
		_, one := procMem(pe.proxy.Process.Pid)
		var wg sync.WaitGroup
		for i := 1; i <= 16; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); stream(i) }()
		}
		wg.Wait()
		_, sixteen := procMem(pe.proxy.Process.Pid)
		b.ReportMetric(float64(one)/(1<<20), "peak-rss-1-MB")
		b.ReportMetric(float64(sixteen)/(1<<20), "peak-rss-16-MB")
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
