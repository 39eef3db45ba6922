package report

import (
	"math"
	"testing"

	"github.com/my-pi/bindery/db"
)

func TestHostsReport(t *testing.T) {
	if HostsReport(nil, DefaultPrices()) != nil {
		t.Fatal("no rows must give no section")
	}
	rows := []db.HostUsage{
		{Conversation: "claude-code:a", Model: "claude-sonnet-4-5", Day: "1970-01-01", Replies: 2, Input: 1000, Output: 2000, CacheRead: 10000, CacheWrite: 3000, CacheWrite1h: 1000, FirstMs: 1000, LastMs: 5000},
		{Conversation: "claude-code:a", Model: "claude-opus-9", Day: "1970-01-01", Replies: 1, Missing: 1, Input: 5, FirstMs: 6000, LastMs: 6000},
		{Conversation: "opencode:b", Model: "claude-sonnet-4-5", Day: "1970-01-02", Replies: 1, Input: 1e6, FirstMs: 2000, LastMs: 2000},
		{Conversation: "script", Model: "claude-sonnet-4-5", Day: "1970-01-02", Replies: 1, FirstMs: 3000, LastMs: 3000},
	}
	h := HostsReport(rows, DefaultPrices())
	if len(h.Conversations) != 3 {
		t.Fatalf("%d lines", len(h.Conversations))
	}
	// sonnet 4.5: $3 in, $15 out, $3.75 write 5m, $0.30 read, 1h write 2x input ($6).
	a := (1000*3 + 2000*15 + 10000*0.30 + 2000*3.75 + 1000*6.0) / 1e6
	b := 3.0
	got := h.Conversations
	if got[0].Conversation != "opencode:b" || got[1].Conversation != "claude-code:a" || got[2].Conversation != "script" {
		t.Fatalf("order %s %s %s", got[0].Conversation, got[1].Conversation, got[2].Conversation)
	}
	if math.Abs(got[1].Total-a) > 1e-12 || math.Abs(got[0].Total-b) > 1e-12 || got[1].Unpriced != 1 || got[1].UsageMissing != 1 || got[1].Client != "claude-code" || got[2].Client != "" {
		t.Fatalf("lines %+v", got)
	}
	if len(got[1].Models) != 2 || got[1].Usage.Entries != 3 || got[1].Usage.Input != 1005 || got[1].Last != "1970-01-01T00:00:06Z" {
		t.Fatalf("line a %+v", got[1])
	}
	if h.Total != got[0].Total+got[1].Total+got[2].Total || h.Unpriced != 1 || h.Usage.Entries != 5 || h.UsageMissing != 1 {
		t.Fatalf("totals %+v", h)
	}
	// The days add up to the total; an unpriced reply is on no day.
	d1, d2 := h.Days["1970-01-01"], h.Days["1970-01-02"]
	if len(h.Days) != 2 || math.Abs(d1.Sum()-a) > 1e-12 || math.Abs(d2.Sum()-b) > 1e-12 || math.Abs(d2.Input-b) > 1e-12 || math.Abs(d1.CacheRead-10000*0.30/1e6) > 1e-12 {
		t.Fatalf("days %+v", h.Days)
	}
}
