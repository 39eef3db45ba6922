package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

// BenchmarkTurnByReference: the daemon's work for one turn of a long
// conversation (compile by reference of the history plus one turn, then
// its accept, with its fsync), after `turns` such turns: daemon-ms/turn is
// the time in Compile and Accept alone (ns/op adds the test's own building
// of the bodies).
func BenchmarkTurnByReference(b *testing.B) {
	for _, turns := range []int{100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			e := newBindingEnv(b, nil)
			ctx := b.Context()
			pad := strings.Repeat("package main\n", 60)
			msgs := []json.RawMessage{json.RawMessage(`{"role":"user","content":"start"}`)}
			var last string
			var lastN int
			var daemonTime time.Duration
			turn := func(i int) (float64, int) {
				body := bodyWith(msgs)
				call := &api.CompileCall{Conversation: "growing", Branch: "main", Return: api.ReturnPlan, Request: body}
				if last != "" && lastN > 1 {
					call.Base = &api.CompileBase{CompileID: last, Messages: lastN - 1, Digest: digestOf(msgs[:lastN-1])}
					call.Request = bodyWith(msgs[lastN-1:])
				}
				sig := fmt.Sprintf("sig-%d-%s", i, strings.Repeat("s", 400))
				r := reply(sig)
				t0 := time.Now()
				ans, err := e.b.Compile(ctx, call)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := e.b.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID, Reply: r}); err != nil {
					b.Fatal(err)
				}
				daemonTime += time.Since(t0)
				last, lastN = ans.CompileID, len(msgs)
				msgs = append(msgs, reply(sig), json.RawMessage(fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":%q}]}`, i, pad)))
				return float64(len(body)), ans.ThinkingStripped
			}
			for i := 0; i < turns; i++ {
				turn(i)
			}
			var size float64
			daemonTime = 0
			b.ResetTimer()
			i := turns
			for b.Loop() {
				var stripped int
				size, stripped = turn(i)
				if stripped != 0 {
					b.Fatalf("turn %d stripped %d blocks", i, stripped)
				}
				i++
			}
			b.ReportMetric(size/1e6, "MB-history")
			b.ReportMetric(float64(daemonTime.Microseconds())/1e3/float64(b.N), "daemon-ms/turn")
		})
	}
}
