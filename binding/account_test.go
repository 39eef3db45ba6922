package binding

import (
	"encoding/json"
	"testing"
)

const sonnet55 = "claude-sonnet-5-5"

// accountRounds runs two rounds on model under account and returns the
// history ending with the second reply.
func accountRounds(s *sim, model, account string) []string {
	s.account = account
	h := []string{u("u1")}
	r1 := a(th("A1"), tx("a1"))
	s.round(model, "sys", h, r1)
	h = append(h, r1, u("u2"))
	r2 := a(th("A2"), tx("a2"))
	s.round(model, "sys", h, r2)
	return append(h, r2)
}

// Research 1.5 and 3: Sonnet 5.5 and Haiku 5.5 blocks are read only in the
// account that minted them. Under another credential they are stripped,
// not released: back under the minting credential they are sent again.
func TestAccountBoundStrippedUnderAnotherAccountNotReleased(t *testing.T) {
	for _, model := range []string{sonnet55, "claude-haiku-5-5", "us.anthropic.claude-haiku-5-5-20261007-v1:0"} {
		t.Run(model, func(t *testing.T) {
			s := newSim(t)
			h := append(accountRounds(s, model, "fpA"), u("u3"))
			if st := s.stamps[key("A1")]; st == nil || st.Account != "fpA" {
				t.Fatalf("the accept's stamp does not carry the account: %+v", st)
			}
			s.account = "fpB"
			c, sent := s.compile(body(model, "sys", h))
			expectStrips(t, c, "messages.1.content.0 account-mismatch", "messages.3.content.0 account-mismatch")
			if len(c.Record.Strips) != 0 {
				t.Fatalf("account-mismatch released: %+v", c.Record.Strips)
			}
			if c.Record.Account != "fpB" {
				t.Fatalf("record account %q", c.Record.Account)
			}
			var got struct{ Messages []json.RawMessage }
			if err := json.Unmarshal(sent, &got); err != nil || len(got.Messages) != 5 {
				t.Fatalf("sent %s (%v)", sent, err)
			}
			// The reply under B is minted with A's blocks absent; accepted.
			rB := a(th("B1"), tx("b1"))
			s.mint(sent, rB)
			if _, err := s.accept(c.ID, rB); err != nil {
				t.Fatal(err)
			}
			if st := s.stamps[key("B1")]; st == nil || st.Account != "fpB" {
				t.Fatalf("B's stamp %+v", st)
			}
			// Back under A: A's blocks come back; B's block, minted under B,
			// is not sent under A (and is not released either).
			s.account = "fpA"
			h = append(h, rB, u("u4"))
			c, _ = s.compile(body(model, "sys", h))
			expectStrips(t, c, "messages.5.content.0 account-mismatch")
			if len(c.Record.Strips) != 0 {
				t.Fatalf("released: %+v", c.Record.Strips)
			}
		})
	}
}

// Both sides must be known: a request or a stamp without an account is not
// compared (pi's sessions carry none), and a model whose blocks are not
// account-bound is never stripped for it.
func TestAccountUnknownOrNotBoundKeeps(t *testing.T) {
	cases := []struct {
		name, model, mint, send string
	}{
		{"request without account", sonnet55, "fpA", ""},
		{"stamps without account", sonnet55, "", "fpB"},
		{"same account", sonnet55, "fpA", "fpA"},
		{"model not account-bound", opus55, "fpA", "fpB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			h := append(accountRounds(s, tc.model, tc.mint), u("u3"))
			s.account = tc.send
			c, _ := s.compile(body(tc.model, "sys", h))
			expectStrips(t, c)
		})
	}
}

// Attribution by prefix stamps a reply with the account of the compile it
// is attributed to, and two compiles at one head under different accounts
// disagree: the reply is not attributed (stripped no-stamp), never stamped
// with the wrong account.
func TestAccountAttribution(t *testing.T) {
	s := newSim(t)
	s.account = "fpA"
	h := []string{u("u1")}
	c1, sent := s.compile(body(sonnet55, "sys", h))
	r1 := a(th("A1"), tx("a1"))
	s.mint(sent, r1)
	if _, err := s.accept(c1.ID, ""); err != nil { // accepted without its reply
		t.Fatal(err)
	}
	h = append(h, r1, u("u2"))
	c, _ := s.compile(body(sonnet55, "sys", h))
	expectStrips(t, c)
	if st := s.stamps[key("A1")]; st == nil || st.Account != "fpA" {
		t.Fatalf("attributed stamp %+v", st)
	}

	s = newSim(t)
	s.account = "fpA"
	h = []string{u("u1")}
	cA, sent := s.compile(body(sonnet55, "sys", h))
	s.account = "fpB"
	s.compile(body(sonnet55, "sys", h))
	r1 = a(th("X1"), tx("a1"))
	s.mint(sent, r1)
	if _, err := s.accept(cA.ID, ""); err != nil {
		t.Fatal(err)
	}
	s.account = "fpA"
	h = append(h, r1, u("u2"))
	c, _ = s.compile(body(sonnet55, "sys", h))
	if len(c.Skipped) != 1 {
		t.Fatalf("two accounts at one head must not attribute: skipped %+v, strips %v", c.Skipped, reasons(c))
	}
	if st := s.stamps[key("X1")]; st != nil {
		t.Fatalf("stamped under a guess: %+v", st)
	}
}

func TestAccountBoundTable(t *testing.T) {
	m := DefaultModelTable()
	for model, want := range map[string]bool{
		sonnet55: true, "claude-haiku-5-5": true, "anthropic/claude-sonnet-5.5": true,
		opus55: false, "claude-fable-5-2": false, "claude-sonnet-5": false, "claude-unknown-9": false,
	} {
		if got := m.AccountBound(model); got != want {
			t.Errorf("AccountBound(%q) = %v, want %v", model, got, want)
		}
	}
	o, err := ParseModelTable([]byte(`{"models":[{"id":"claude-opus-6","binds":true,"accountBound":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !o.AccountBound("claude-opus-6") || !o.AccountBound(sonnet55) {
		t.Fatal("override table loses accountBound")
	}
	if ReasonAccountMismatch.Releases() {
		t.Fatal("account-mismatch must not release")
	}
}

// Two keys of one organization are one account once an alias says so,
// for stamps minted before the alias was known too; without it they are
// two.
func TestAccountAliases(t *testing.T) {
	s := newSim(t)
	h := append(accountRounds(s, sonnet55, "fpKey1"), u("u3"))
	s.account = "fpKey2"
	c, _ := s.compile(body(sonnet55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 account-mismatch", "messages.3.content.0 account-mismatch")
	aliases := map[string]string{"fpKey1": "fpOrg", "fpKey2": "fpOrg"}
	req, err := ParseRequest(body(sonnet55, "sys", h))
	if err != nil {
		t.Fatal(err)
	}
	in := CompileInput{ID: "cx", Conversation: "conv", Branch: "main", Seq: 99, Request: req, Engaged: true,
		Stamps: StampsFor(req, s.stamps), Released: s.rel["main"], Owner: s.owner["main"], Account: "fpKey2", AccountAliases: aliases}
	got, err := Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	expectStrips(t, got)
	in.AccountAliases = map[string]string{"fpKey1": "fpOrg", "fpKey2": "fpOtherOrg"}
	if got, _ = Compile(in); len(got.Strips) != 2 {
		t.Fatalf("keys of two organizations kept each other's blocks: %v", reasons(got))
	}
}
