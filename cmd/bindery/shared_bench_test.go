package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db/pgtest"
)

// BenchmarkReadThrough: a compile on a second machine whose stamps are read
// through from the shared tier (the first compile there of a history the
// first machine made) against the same compile where the stamps are local
// (the first machine, under another conversation id), in one
// run: each iteration a fresh 20-turn history, shipped before it is timed.
func BenchmarkReadThrough(b *testing.B) {
	dsn := pgtest.Database(b)
	laptop := newDaemon(b, "--shared", dsn, "--machine", "laptop")
	devbox := newDaemon(b, "--shared", dsn, "--machine", "devbox")
	var through, local time.Duration
	blocks := 0
	for i := 0; b.Loop(); i++ {
		h := newHost(b)
		conv := fmt.Sprintf("bench-%d", i)
		for turn := 0; turn < 20; turn++ {
			h.messages = append(h.messages, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d", turn)})
			h.roundTrip(laptop, api.CompileCall{Conversation: conv, Branch: "main"}, nil)
		}
		h.messages = append(h.messages, map[string]any{"role": "user", "content": "and now?"})
		for deadline := time.Now().Add(30 * time.Second); ; {
			hl, err := laptop.client.Health(ctxT(b))
			if err == nil && hl.Shared != nil && hl.Shared.Outbox == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the outbox did not ship")
			}
			time.Sleep(20 * time.Millisecond)
		}
		body := h.body(h.system)
		t0 := time.Now()
		ans, err := devbox.client.Compile(ctxT(b), &api.CompileCall{Conversation: conv, Branch: "main", Return: api.ReturnPlan, Request: body})
		through += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		loc, err := laptop.client.Compile(ctxT(b), &api.CompileCall{Conversation: conv + "-local", Branch: "main", Return: api.ReturnPlan, Request: body})
		local += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if ans.ThinkingKept != loc.ThinkingKept {
			b.Fatalf("read through kept %d, local %d", ans.ThinkingKept, loc.ThinkingKept)
		}
		blocks = ans.ThinkingKept + ans.ThinkingStripped
	}
	n := float64(b.N)
	b.ReportMetric(float64(blocks), "blocks")
	b.ReportMetric(float64(through.Microseconds())/n, "read-through-µs")
	b.ReportMetric(float64(local.Microseconds())/n, "local-µs")
	b.ReportMetric(float64(through)/float64(local), "through/local")
}
