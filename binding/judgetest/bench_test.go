package judgetest

import (
	"encoding/json"
	"testing"
)

// benchBody is a 40-turn conversation with a tool round every other turn.
func benchBody(b *testing.B) (*conv, []byte) {
	c := newConv(b, ENF, Documented())
	for i := 0; i < 40; i++ {
		c.user("question")
		if i%2 == 0 {
			c.turn(think("reasoning about the next step"), call("t", "bash"))
			c.toolResult("t", "a tool result of moderate length, repeated a few times for size")
		}
		c.turn(think("more reasoning"), say("answer"))
	}
	c.user("next")
	return c, c.body()
}

// BenchmarkJudge judges one request with the judge's message cache warm (as
// in a simulation, where every request resends the previous messages).
func BenchmarkJudge(b *testing.B) {
	c, body := benchBody(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if res := c.j.Judge(Call{Body: body}); res.Status != 200 {
			b.Fatal(res.Error)
		}
	}
}

// BenchmarkJudgeCold judges with an empty cache every time.
func BenchmarkJudgeCold(b *testing.B) {
	_, body := benchBody(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		j := New(Options{Reading: Documented(), NewAccount: true})
		if res := j.Judge(Call{Body: body}); res.Status != 200 {
			b.Fatal(res.Error)
		}
	}
}

// BenchmarkBaselineJSONValid is the simplest pass over the same bytes.
func BenchmarkBaselineJSONValid(b *testing.B) {
	_, body := benchBody(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}
