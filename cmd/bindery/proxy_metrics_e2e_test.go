package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape reads the proxy's metrics: series name with labels -> value.
func (pe *proxyE2E) scrape() (map[string]float64, string) {
	pe.t.Helper()
	resp, err := http.Get(pe.metrics)
	if err != nil {
		pe.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		pe.t.Fatalf("GET /metrics: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			pe.t.Fatalf("metrics line %q", line)
		}
		out[line[:i]] = v
	}
	return out, string(b)
}

// thinkingCount is how many thinking blocks a request body holds.
func thinkingCount(t *testing.T, body []byte) int {
	t.Helper()
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range req.Messages {
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "thinking" || b.Type == "redacted_thinking" {
					n++
				}
			}
		}
	}
	return n
}

// TestProxyMetrics: `--metrics` serves Prometheus' text format on loopback,
// and its counts are the run's: requests by route and status, time to
// first byte per request, the blocks the plans stripped and kept (as the
// upstream received them), accepts. Nothing a client sent is in it.
func TestProxyMetrics(t *testing.T) {
	pe := newProxyE2E(t, "--metrics", "127.0.0.1:0")
	pe.up.SetReply(toolLoop(2))
	pe.up.SetStream(true, 0)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.header.Set("X-Claude-Code-Session-Id", "3f1c9e2a-0000-4000-8000-metricsprobe")
	h.cycle("fix the parser")
	h.clearOldestToolResult()
	h.cycle("and the docs")
	resp, err := http.Get(pe.addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	got := pe.up.Messages()
	sent, arrived := 0, 0
	for i, r := range got {
		sent += thinkingCount(t, h.sent[i])
		arrived += thinkingCount(t, r.Body)
	}
	if sent == arrived {
		t.Fatal("the run stripped nothing: the test proves nothing about strips")
	}
	turns := float64(len(h.sent))
	var m map[string]float64
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; {
		m, text = pe.scrape()
		if m[`bindery_proxy_accepts_total{outcome="ok"}`] == turns || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := map[string]float64{
		`bindery_proxy_requests_total{code="200",route="messages"}`:        turns,
		`bindery_proxy_requests_total{code="200",route="other"}`:           1,
		`bindery_proxy_time_to_first_byte_seconds_count{route="messages"}`: turns,
		`bindery_proxy_compile_seconds_count`:                              turns,
		`bindery_proxy_thinking_stripped_total`:                            float64(sent - arrived),
		`bindery_proxy_thinking_kept_total`:                                float64(arrived),
		`bindery_proxy_accepts_total{outcome="ok"}`:                        turns,
		`bindery_proxy_requests_in_flight`:                                 0,
		`bindery_daemon_up`:                                                1,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if strings.Contains(text, "bindery_shared_") {
		t.Errorf("a machine alone has shared-tier series:\n%s", text)
	}
	for _, secret := range []string{testAPIKey, "metricsprobe", "fix the parser", "claude-opus-5-5"} {
		if strings.Contains(text, secret) {
			t.Errorf("the metrics carry %q", secret)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("metrics:\n%s", text)
	}
}

// TestProxyMetricsLoopbackOnly: the metrics listen on loopback or nowhere.
func TestProxyMetricsLoopbackOnly(t *testing.T) {
	e := newE2E(t)
	out, err := exec.Command(e.bin, "proxy", "--listen", "127.0.0.1:0", "--metrics", "0.0.0.0:9464").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--metrics") || !strings.Contains(string(out), "not a loopback address") {
		t.Fatalf("err %v:\n%s", err, out)
	}
}
