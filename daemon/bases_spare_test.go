package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
)

// TestBaseSpareLifetimes: a dropped base's memory becomes a spare only
// once no compile reads it, its body only when rebuild made it and no
// answer holds it, and the spares stay within their bounds.
func TestBaseSpareLifetimes(t *testing.T) {
	parsed := func(body []byte) (*binding.Request, binding.RequestMemory) {
		var p binding.Parser
		r, err := p.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		return r, p.Built()
	}
	mk := func(id, conv string, n int, own, lent bool) *base {
		body := bodyWith([]json.RawMessage{json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("x", n)))})
		r, mem := parsed(body)
		return &base{id: id, conversation: conv, body: body, req: r, mem: mem, ownBody: own, lent: lent}
	}
	t.Run("held while read", func(t *testing.T) {
		s := &baseStore{}
		s.put(mk("a1", "a", 100, true, false), nil)
		held, ok := s.acquire("a1")
		if !ok {
			t.Fatal("a1 not held")
		}
		want := append([]byte(nil), held.body...)
		s.put(mk("a2", "a", 100, true, false), nil)
		s.put(mk("a3", "a", 100, true, false), nil) // drops a1
		if _, ok := s.get("a1"); ok {
			t.Fatal("a1 still kept")
		}
		if len(s.spares.list) != 0 {
			t.Fatal("a base a compile reads became a spare")
		}
		body, _ := s.spareFor(len(want))
		body = append(body, bytes.Repeat([]byte{'!'}, len(want))...)
		if !bytes.Equal(held.body, want) || held.req == nil {
			t.Fatal("a held base's body changed")
		}
		s.release(held)
		if len(s.spares.list) != 1 || cap(s.spares.list[0].body) < len(want) || s.spares.list[0].mem.Messages == nil {
			t.Fatalf("the released base left %d spares", len(s.spares.list))
		}
		if held.body != nil || held.req != nil {
			t.Fatal("a recycled base still names its memory")
		}
		got, mem := s.spareFor(len(want))
		if cap(got) < len(want) || mem.Messages == nil || s.spares.reused != 1 || len(s.spares.list) != 0 {
			t.Fatalf("the spare was not handed out (reused %d)", s.spares.reused)
		}
	})
	t.Run("a lent or a host's body is not reused, its parse's memory is", func(t *testing.T) {
		s := &baseStore{}
		s.put(mk("l1", "l", 100, true, true), nil)
		s.put(mk("h1", "h", 100, false, false), nil)
		for _, c := range []string{"l", "h"} {
			s.put(mk(c+"2", c, 10, true, true), nil)
			s.put(mk(c+"3", c, 10, true, true), nil)
		}
		if _, ok := s.get("l1"); ok {
			t.Fatal("l1 still kept")
		}
		if len(s.spares.list) != 2 {
			t.Fatalf("%d spares, want the parse memory of l1 and h1", len(s.spares.list))
		}
		for _, sp := range s.spares.list {
			if sp.body != nil || sp.mem.Messages == nil {
				t.Fatalf("a spare with body %v and parse memory %v, want only the memory", sp.body != nil, sp.mem.Messages != nil)
			}
		}
		for range 2 {
			if body, mem := s.spareFor(10); cap(body) < 10 || mem.Messages == nil || s.spares.reused != 0 {
				t.Fatal("a new body did not come with the spare parse memory")
			}
		}
		if _, mem := s.spareFor(10); mem.Messages != nil || len(s.spares.list) != 0 {
			t.Fatal("parse memory handed out twice")
		}
	})
	t.Run("bounds", func(t *testing.T) {
		s := &baseStore{}
		for i := range 2 * maxSpares {
			c := fmt.Sprint("c", i)
			s.put(mk(c+"1", c, 100*(i+1), true, false), nil)
			s.put(mk(c+"2", c, 1, true, false), nil)
			s.put(mk(c+"3", c, 1, true, false), nil)
		}
		if len(s.spares.list) != maxSpares {
			t.Fatalf("%d spares, want %d", len(s.spares.list), maxSpares)
		}
		for _, sp := range s.spares.list {
			if cap(sp.body) < 100*(maxSpares+1) {
				t.Fatalf("a spare of %d bytes kept over larger ones", cap(sp.body))
			}
		}
		small := &baseStore{maxBytes: 4 * 1024}
		small.put(mk("x1", "x", 900, true, false), nil)
		small.put(mk("x2", "x", 1, true, false), nil)
		small.put(mk("x3", "x", 1, true, false), nil)
		if small.spares.bytes > small.maxBytes/4 {
			t.Fatalf("spares hold %d bytes, over %d", small.spares.bytes, small.maxBytes/4)
		}
	})
}

// TestBaseMemoryReuse: conversations compiled by reference turn after
// turn, concurrently, in memory their earlier turns left, get exactly the
// answers a twin compiled whole gets (plans, and whole requests where one
// is asked for, which stay as answered), retries against an older base
// included; and the memory was reused.
func TestBaseMemoryReuse(t *testing.T) {
	e := newBindingEnv(t, nil)
	ctx := t.Context()
	type kept struct{ got, want []byte }
	var mu sync.Mutex
	var answered []kept
	run := func(conv string) error {
		user := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, s)) }
		msgs := []json.RawMessage{user(conv + strings.Repeat(" start", 50))}
		var last string
		var lastN int
		for turn := range 30 {
			ret := api.ReturnPlan
			if turn%4 == 3 {
				ret = api.ReturnRequest
			}
			call := func() (*api.CompileAnswer, error) {
				c := &api.CompileCall{Conversation: conv, Branch: "main", Return: ret, Request: bodyWith(msgs)}
				if last != "" && lastN > 1 {
					c.Base = &api.CompileBase{CompileID: last, Messages: lastN - 1, Digest: digestOf(msgs[:lastN-1])}
					c.Request = bodyWith(msgs[lastN-1:])
				}
				return e.b.Compile(ctx, c)
			}
			w, err := e.b.Compile(ctx, &api.CompileCall{Conversation: conv + "-whole", Branch: "main", Return: ret, Request: bodyWith(msgs)})
			if err != nil {
				return err
			}
			r, err := call()
			if err != nil {
				return fmt.Errorf("%s turn %d: %w", conv, turn, err)
			}
			if turn%6 == 5 {
				// a retry against the same base
				if r, err = call(); err != nil {
					return fmt.Errorf("%s turn %d, retried: %w", conv, turn, err)
				}
			}
			if planOf(r) != planOf(w) {
				return fmt.Errorf("%s turn %d: by reference\n %s\nwhole\n %s", conv, turn, planOf(r), planOf(w))
			}
			if ret == api.ReturnRequest {
				if !bytes.Equal(r.Request, w.Request) {
					return fmt.Errorf("%s turn %d: the whole request differs from the twin's", conv, turn)
				}
				mu.Lock()
				answered = append(answered, kept{r.Request, append([]byte(nil), w.Request...)})
				mu.Unlock()
			}
			sig := fmt.Sprintf("sig-%s-%d-%s", conv, turn, strings.Repeat("s", 200))
			for _, id := range []string{r.CompileID, w.CompileID} {
				if _, err := e.b.Accept(ctx, &api.AcceptCall{CompileID: id, Reply: reply(sig)}); err != nil {
					return err
				}
			}
			last, lastN = r.CompileID, len(msgs)
			msgs = append(msgs, reply(sig), user(fmt.Sprintf("%s turn %d %s", conv, turn, strings.Repeat("t", 300))))
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = run(fmt.Sprint("conv-", i)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range answered {
		if !bytes.Equal(a.got, a.want) {
			t.Fatalf("answer %d changed after it was given: its memory was reused", i)
		}
	}
	e.b.bases.mu.Lock()
	reused, extended := e.b.bases.spares.reused, e.b.bases.spares.extended
	e.b.bases.mu.Unlock()
	t.Logf("reused %d, extended %d", reused, extended)
	if reused+extended < 60 || extended < 30 {
		t.Fatalf("of 102 compiles by reference, rebuild reused %d bodies and extended %d", reused, extended)
	}
}
