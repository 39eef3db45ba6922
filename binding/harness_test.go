package binding

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A small in-memory daemon and provider for the decision's tests: the host
// keeps its history as JSON messages, compiles through the decision with
// the state a daemon would load, sends the rewritten bytes to an oracle that
// mints stamps from what was actually sent, and accepts.

func q(s string) string { return fmt.Sprintf("%q", s) }

func u(text string) string {
	return `{"role":"user","content":[{"type":"text","text":` + q(text) + `}]}`
}
func a(blocks ...string) string {
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}
func th(sig string) string {
	return `{"type":"thinking","thinking":"thought ` + sig + `","signature":` + q(sig) + `}`
}
func rth(data string) string { return `{"type":"redacted_thinking","data":` + q(data) + `}` }
func tx(text string) string  { return `{"type":"text","text":` + q(text) + `}` }
func tu(id string) string {
	return `{"type":"tool_use","id":` + q(id) + `,"name":"read","input":{"path":"a.go"}}`
}
func tr(id, text string) string {
	return `{"role":"user","content":[{"type":"tool_result","tool_use_id":` + q(id) + `,"content":` + q(text) + `}]}`
}
func compaction(text string) string { return `{"type":"compaction","content":` + q(text) + `}` }

func body(model, system string, msgs []string) []byte {
	return []byte(`{"model":` + q(model) + `,"max_tokens":1024,"system":` + q(system) +
		`,"thinking":{"type":"adaptive"},"messages":[` + strings.Join(msgs, ",") + `]}`)
}

const opus55 = "claude-opus-5-5"

type sim struct {
	t       *testing.T
	models  *ModelTable
	stamps  map[Digest]*Stamp
	rel     map[string]map[Digest]bool
	recs    map[string]*CompileRecord
	byBr    map[string][]string
	owner   map[string]*CompileRecord
	engaged bool
	seq     int64
	dry     map[string]bool
	tomb    map[string]bool
	account string // the credential fingerprint compiles are sent under

	// oracle
	truth    map[Digest]*Stamp
	siblings map[Digest][]Digest // the thinking keys of the reply a block was minted in
	lastSent map[string][]byte   // compile id -> bytes sent
}

func newSim(t *testing.T) *sim {
	return &sim{t: t, models: DefaultModelTable(), stamps: map[Digest]*Stamp{}, rel: map[string]map[Digest]bool{},
		recs: map[string]*CompileRecord{}, byBr: map[string][]string{}, owner: map[string]*CompileRecord{},
		dry: map[string]bool{}, tomb: map[string]bool{}, truth: map[Digest]*Stamp{}, siblings: map[Digest][]Digest{},
		lastSent: map[string][]byte{}}
}

type copt struct {
	branch string
	dry    bool
	binds  *bool
}

func key(sig string) Digest { return SignatureKey(sig) }

func (s *sim) compileOpt(o copt, b []byte) (*Compiled, []byte) {
	s.t.Helper()
	if o.branch == "" {
		o.branch = "main"
	}
	req, err := ParseRequest(b)
	if err != nil {
		s.t.Fatalf("parse: %v\n%s", err, b)
	}
	st := map[Digest]*Stamp{}
	for _, k := range StampKeys(req) {
		if x, ok := s.stamps[k]; ok {
			st[k] = x
		}
	}
	var rem []*CompileRecord
	for _, id := range s.byBr[o.branch] {
		rem = append(rem, s.recs[id])
	}
	s.seq++
	id := fmt.Sprintf("c%d", s.seq)
	c, err := Compile(CompileInput{ID: id, Conversation: "conv", Branch: o.branch, Seq: s.seq, Request: req,
		BindsThinking: o.binds, DryRun: o.dry, Engaged: s.engaged, Account: s.account, Stamps: StampsFor(req, st), Released: s.rel[o.branch],
		Remembered: rem, Owner: s.owner[o.branch], Models: s.models})
	if err != nil {
		s.t.Fatal(err)
	}
	if o.dry {
		if c.Persist.Record != nil || len(c.Persist.Stamps) != 0 {
			s.t.Fatalf("dry run persists %+v", c.Persist)
		}
		s.dry[id] = true
	}
	if r := c.Persist.Record; r != nil {
		s.recs[id] = r
		s.byBr[o.branch] = append(s.byBr[o.branch], id)
		s.retain(o.branch)
	}
	for _, x := range c.Persist.Stamps {
		if _, ok := s.stamps[x.Key]; !ok {
			s.stamps[x.Key] = &x
		}
	}
	sent := c.Rewrite(b, req)
	s.lastSent[id] = sent
	if refused := s.judge(sent); len(refused) > 0 && c.Binds {
		s.t.Fatalf("compile %s sends blocks the provider refuses: %v", id, refused)
	}
	return c, sent
}

func (s *sim) compile(b []byte) (*Compiled, []byte) { return s.compileOpt(copt{}, b) }

func (s *sim) retain(branch string) {
	ids := s.byBr[branch]
	if len(ids) == 0 {
		return
	}
	var rc []RememberedCompile
	for br, ids := range s.byBr {
		for _, id := range ids {
			r := s.recs[id]
			rc = append(rc, RememberedCompile{ID: id, Seq: r.Seq, Branch: br, Accepted: r.Accepted, Record: true})
		}
	}
	next := s.recs[ids[len(ids)-1]]
	own := ""
	if o := s.owner[branch]; o != nil {
		own = o.ID
	}
	plan := Retain(Retention{PerBranch: MinRemembered, PerConversation: DefaultRetention.PerConversation}, slices.Values(rc), RememberedCompile{ID: next.ID, Seq: next.Seq, Branch: branch, Accepted: next.Accepted, Record: true}, own)
	gone := func(id string) {
		delete(s.recs, id)
		for br := range s.byBr {
			s.byBr[br] = slices.DeleteFunc(s.byBr[br], func(x string) bool { return x == id })
		}
	}
	for _, id := range plan.DropRecords {
		s.tomb[id] = true // an accepted compile kept by its id alone
		gone(id)
	}
	for _, id := range plan.Forget {
		gone(id)
	}
}

func (s *sim) accept(id, reply string, trs ...InputTransformation) (*AcceptOutcome, error) {
	s.t.Helper()
	rec := s.recs[id]
	if rec == nil && s.dry[id] {
		rec = &CompileRecord{ID: id, DryRun: true}
	}
	if rec == nil && s.tomb[id] {
		rec = &CompileRecord{ID: id, Accepted: true}
	}
	var rp []byte
	if reply != "" {
		rp = []byte(reply)
		if m, err := ParseReply(rp); err == nil {
			for _, k := range ReplyKeys(m) {
				_ = k
			}
		}
	}
	var owner *CompileRecord
	if rec != nil {
		owner = s.owner[rec.Branch]
	}
	out, err := Accept(AcceptInput{Record: rec, Owner: owner, Engaged: s.engaged, Reply: rp, Transformations: trs, Stamps: s.stamps})
	if err != nil {
		return nil, err
	}
	if out.Noop {
		return out, nil
	}
	if err := acceptChangedOnly(rec, out.Record); err != nil {
		return nil, err
	}
	s.recs[id] = out.Record
	if out.Owner {
		s.owner[rec.Branch] = out.Record
	}
	if out.Engage {
		s.engaged = true
	}
	for _, x := range out.Stamps {
		if _, ok := s.stamps[x.Key]; !ok {
			s.stamps[x.Key] = &x
		}
	}
	for _, r := range out.Releases {
		if s.rel[rec.Branch] == nil {
			s.rel[rec.Branch] = map[Digest]bool{}
		}
		s.rel[rec.Branch][r.Key] = true
	}
	return out, nil
}

// mint plays the provider answering the bytes sent with reply: it records,
// from those bytes alone, what each reply block is bound to.
func (s *sim) mint(sent []byte, reply string, dropped ...Digest) {
	s.t.Helper()
	req, err := ParseRequest(sent)
	if err != nil {
		s.t.Fatal(err)
	}
	end := ChainStart()
	if n := len(req.Messages); n > 0 {
		end = req.Messages[n-1].End
	}
	var last Digest
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			if isThinking(b.Kind) && !slices.Contains(dropped, b.Key) {
				if t, ok := s.truth[b.Key]; ok && !s.models.Reads(req.Model, t.Model) {
					continue
				}
				last = b.Key
			}
		}
	}
	rm, err := ParseReply([]byte(reply))
	if err != nil {
		s.t.Fatal(err)
	}
	var sib []Digest
	pred := last
	rm.StepFrom(end, func(j int, ch Digest) {
		b := rm.Blocks[j]
		if isThinking(b.Kind) {
			s.truth[b.Key] = &Stamp{Key: b.Key, Seed: req.Seed, Chain: ch, Pred: pred, Model: req.Model}
			pred = b.Key
			sib = append(sib, b.Key)
		}
	})
	for _, k := range sib {
		s.siblings[k] = sib
	}
}

// judge returns the paths of the thinking blocks a binding provider would
// refuse in sent (blocks it does not know are history the test did not
// mint: judged by the run rule only).
func (s *sim) judge(sent []byte) []string {
	req, err := ParseRequest(sent)
	if err != nil {
		s.t.Fatal(err)
	}
	var bad []string
	var prev Digest
	have := false
	latest := -1
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			latest = i
		}
	}
	for i, m := range req.Messages {
		var keys []Digest
		for j, b := range m.Blocks {
			if !isThinking(b.Kind) {
				continue
			}
			keys = append(keys, b.Key)
			p := Pos{i, j}.Path()
			if !b.Signed {
				bad = append(bad, p+" unsigned")
				continue
			}
			t, ok := s.truth[b.Key]
			if ok && !s.models.Reads(req.Model, t.Model) {
				continue // dropped unread
			}
			if ok {
				switch {
				case !s.models.Binds(t.Model):
					bad = append(bad, p+" unbound")
				case t.Chain != b.Chain || t.Seed != req.Seed:
					bad = append(bad, p+" prefix")
				case have && t.Pred != prev:
					bad = append(bad, p+" run")
				}
			}
			prev, have = b.Key, true
		}
		if i == latest && len(keys) > 0 {
			if sib, ok := s.siblings[keys[0]]; ok && !slices.Equal(sib, keys) {
				bad = append(bad, MessagePath(i)+" partial latest")
			}
		}
	}
	return bad
}

// round compiles msgs, mints reply from what was sent and accepts with it.
func (s *sim) round(model, system string, msgs []string, reply string) *Compiled {
	s.t.Helper()
	c, sent := s.compile(body(model, system, msgs))
	s.mint(sent, reply)
	if _, err := s.accept(c.ID, reply); err != nil {
		s.t.Fatal(err)
	}
	return c
}

func reasons(c *Compiled) []string {
	var out []string
	for _, x := range c.Strips {
		out = append(out, x.Path()+" "+string(x.Reason))
	}
	return out
}

func expectStrips(t *testing.T, c *Compiled, want ...string) {
	t.Helper()
	got := reasons(c)
	if !slices.Equal(got, want) {
		t.Fatalf("strips:\n got %q\nwant %q", got, want)
	}
}

// acceptChangedOnly checks Accept's contract with the store: an accepted
// record is the compile's record with Accepted and LastRead set, nothing
// else changed (db.MarkAccepted writes only those two beside the record it
// keeps as compiled).
func acceptChangedOnly(rec, acc *CompileRecord) error {
	want := *rec
	want.Accepted, want.LastRead = acc.Accepted, acc.LastRead
	if !acc.Accepted || !reflect.DeepEqual(&want, acc) {
		return fmt.Errorf("accept of %s changed its record beyond Accepted and LastRead: %+v, was %+v", rec.ID, acc, rec)
	}
	return nil
}
