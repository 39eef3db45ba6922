package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// toolRequest is a Messages body of n messages shaped like pi's tool
// loop: assistant tool calls and user tool results, every tool result
// starting with the same bytes (the memo's key prefix) and differing only
// after them, as pi's do.
func toolRequest(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-fable-5-2","max_tokens":1024,"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01AAAAAAAAAAAAAAAAAAAAAAAA%08d","content":"output line of tool call %d"}]}`, i, i)
		} else {
			fmt.Fprintf(&b, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01AAAAAAAAAAAAAAAAAAAAAAAA%08d","name":"bash","input":{"command":"ls %d"}}]}`, i+1, i)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkCompileMessages measures a compile through the socket against
// the message count, on a conversation's first compile (fresh) and on its
// next one (the memo holds every message). ns/msg must stay flat from 1k
// to 100k messages: compile is linear in the request.
func BenchmarkCompileMessages(b *testing.B) {
	for _, n := range scaleCounts {
		body := toolRequest(n)
		for _, mode := range []string{"fresh", "memo"} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				e := newBindingEnv(b, nil)
				ctx := context.Background()
				i := 0
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					conv := "scale"
					if mode == "fresh" {
						i++
						conv = fmt.Sprintf("scale-%d", i)
					}
					ans, err := e.client.Compile(ctx, &api.CompileCall{Conversation: conv, Return: api.ReturnPlan, Request: json.RawMessage(body)})
					if err != nil {
						b.Fatal(err)
					}
					_ = ans
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/msg")
			})
		}
	}
}

var scaleCounts = []int{1_000, 10_000, 100_000}
