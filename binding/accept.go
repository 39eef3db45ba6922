package binding

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Accept: stamping with the reply, provider truth (input_transformations),
// the compile's strips becoming releases, engagement and the branch owner
// (design/binding.md "Stamping and attribution", "Provider truth beats
// inference").

// InputTransformation is one entry of the response's input_transformations
// (preserved-thinking.md 2.6). Path refers to the request as sent.
type InputTransformation struct {
	Type   string `json:"type"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// input_transformations values bindery acts on; others are reported as
// events and otherwise ignored, as the provider asks.
const (
	TransformDropped      = "thinking_dropped"
	TransformAllowed      = "thinking_mismatch_allowed"
	ReasonPrefixMismatch  = "prefix_binding_mismatch"
	ReasonModelMismatch   = "model_binding_mismatch"
	ReasonOrgMismatch     = "organization_binding_mismatch"
	ReasonEndUserMismatch = "end_user_binding_mismatch"
)

// AcceptInput is everything one accept reads. The daemon loads the compile
// record by id (nil when unknown or forgotten), the branch's current owner,
// the conversation's engagement, and, when it wants the decision to skip
// stamps that already exist, the stamps for ReplyKeys(reply). The database
// must still insert stamps first-wins (attribution may have raced it).
type AcceptInput struct {
	Record          *CompileRecord
	Owner           *CompileRecord
	Engaged         bool
	Reply           []byte // the reply in the provider's wire shape (optional)
	Transformations []InputTransformation
	Stamps          map[Digest]*Stamp
	Models          *ModelTable // nil: DefaultModelTable(); decides which compaction requests bindery vouches for
}

// AcceptEvent is something an accept logs: a thinking_mismatch_allowed (a
// history edit the host should know about), a model_binding_mismatch or
// other drop (logged, not released), or an entry bindery could not map.
type AcceptEvent struct {
	Type   string // the entry's type, or "unmapped" for a path that names no block the compile sent
	Reason string
	Path   string // as sent
	Orig   string // the same position in the request as the host gave it; "" when unmapped
	Key    Digest
}

// AcceptOutcome is what an accept must persist, in one transaction: the
// updated record (accepted, LastRead net of provider drops), the stamps,
// the releases (scoped by the daemon to the compile's branch), engagement
// and the owner. Noop: the compile was already accepted; persist nothing.
type AcceptOutcome struct {
	Noop     bool
	Record   *CompileRecord
	Owner    bool // the compile becomes its branch's owner
	Engage   bool // the conversation engages with this accept
	Stamps   []Stamp
	Releases []Release
	Events   []AcceptEvent
	// Compactions: the reply was an on-demand compaction block; the
	// daemon stores it first-wins, like a stamp (CompactionOf).
	Compactions []Compaction
}

// Accept decides one accept. Errors: ErrUnknownCompile (nil record),
// ErrDryRun, ErrBadReply (a reply that is not an assistant message);
// an already accepted compile is a Noop, not an error.
func Accept(in AcceptInput) (*AcceptOutcome, error) {
	rec := in.Record
	if rec == nil {
		return nil, ErrUnknownCompile
	}
	if rec.DryRun {
		return nil, ErrDryRun
	}
	if rec.Accepted {
		return &AcceptOutcome{Noop: true, Record: rec}, nil
	}
	var reply *Message
	if len(bytes.TrimSpace(in.Reply)) > 0 && !bytes.Equal(bytes.TrimSpace(in.Reply), []byte("null")) {
		m, err := ParseReply(in.Reply)
		if err != nil {
			return nil, err
		}
		reply = m
	}
	out := &AcceptOutcome{Engage: !in.Engaged}
	out.Owner = in.Owner == nil || in.Owner.Seq < rec.Seq || in.Owner.ID == rec.ID

	// Provider truth: map every entry back through the record.
	dropped := map[Pos]bool{}
	released := map[Digest]bool{}
	for _, tr := range in.Transformations {
		ev := AcceptEvent{Type: tr.Type, Reason: tr.Reason, Path: tr.Path}
		p, err := ParsePath(tr.Path)
		k := -1
		if err == nil {
			k = rec.keptAt(p)
		}
		if k < 0 {
			if tr.Type == TransformDropped || tr.Type == TransformAllowed {
				ev.Type, ev.Reason = "unmapped", tr.Type+"/"+tr.Reason
				out.Events = append(out.Events, ev)
			}
			continue
		}
		kb := rec.Kept[k]
		ev.Orig, ev.Key = kb.Orig.Path(), kb.Key
		switch tr.Type {
		case TransformDropped:
			dropped[p] = true
			if tr.Reason == ReasonPrefixMismatch {
				if !released[kb.Key] {
					released[kb.Key] = true
					out.Releases = append(out.Releases, Release{Key: kb.Key, Reason: ReleaseProvider, Compile: rec.ID, Message: kb.Orig.Message, Path: kb.Orig.Path()})
				}
				continue
			}
			out.Events = append(out.Events, ev)
		case TransformAllowed:
			out.Events = append(out.Events, ev)
		}
	}
	for _, r := range rec.Strips {
		if !released[r.Key] {
			released[r.Key] = true
			out.Releases = append(out.Releases, r)
		}
	}

	// The last block the model read: the last kept one it can read, minus
	// those the provider reported dropped (a decision [INF]: a dropped block
	// was not read, so it is not the next block's predecessor).
	acc := *rec
	acc.Accepted = true
	acc.LastRead = Digest{}
	for i := len(rec.Kept) - 1; i >= 0; i-- {
		kb := rec.Kept[i]
		if !kb.Unreadable && !dropped[kb.Sent] {
			acc.LastRead = kb.Key
			break
		}
	}
	out.Record = &acc
	if reply != nil {
		for _, s := range StampReply(&acc, reply) {
			if _, ok := in.Stamps[s.Key]; ok {
				continue
			}
			out.Stamps = append(out.Stamps, s)
		}
		models := in.Models
		if models == nil {
			models = DefaultModelTable()
		}
		if c, ok := CompactionOf(&acc, reply, models); ok {
			out.Compactions = append(out.Compactions, c)
		}
	}
	return out, nil
}

// CompactionOf returns the Compaction record of a reply that is an on-demand
// compaction block: the reply is that one block, signed, and answers the
// compile rec. The block replaces exactly the messages of the compaction
// request (the provider's compaction-on-demand page: the API summarizes
// every message in the request; the host replaces the messages it sent with
// the returned message), so it stands for rec's chain as sent. Nothing when
// rec's target does not bind, or is a model the table does not know:
// kept thinking stays valid only if every compaction since it was minted
// ran on a model with preserved thinking, and bindery vouches only for the
// models it knows run the check (an unknown model is treated as binding
// for strips, which is the safe side there; here the safe side is the
// other one). Nothing
// either when rec does not say which role its last message had (a record
// stored before LastRole existed).
func CompactionOf(rec *CompileRecord, reply *Message, models *ModelTable) (Compaction, bool) {
	if rec == nil || reply == nil || !rec.Binds || !models.Known(rec.Model) || rec.LastRole == "" || len(reply.Blocks) != 1 {
		return Compaction{}, false
	}
	b := &reply.Blocks[0]
	if b.Kind != KindCompaction || !b.Signed {
		return Compaction{}, false
	}
	return Compaction{Key: b.Digest, Chain: rec.End, Seed: rec.Seed, LastRole: rec.LastRole, Compile: rec.ID, Through: rec.Through}, true
}

// ParseReply parses an assistant reply in the provider's wire shape into a
// Message whose frame and block digests are what the reply will be when a
// later request replays it. Two shapes:
//   - Messages: {"role": "assistant", "content": [...]} (or a whole
//     Messages response: its other fields are ignored);
//   - Converse: {"role": "assistant", "content": [{reasoningContent}, {text},
//     {toolUse}, ...]}, or a whole Converse response, whose message is at
//     output.message, or a ConverseStream response's events (a JSON array:
//     ConverseStreamReply assembles the message). A content array is
//     Converse when every block is an object of one member and none has a
//     type member.
//
// Only role and content count: a host replays the reply as those two fields
// (pi's serializers do), so other fields of a provider response (id, model,
// stop_reason, usage) are ignored. Block chains are not set (see StampReply).
func ParseReply(reply []byte) (*Message, error) {
	if t := bytes.TrimSpace(reply); len(t) > 0 && t[0] == '[' {
		m, err := ConverseStreamReply(t)
		if err != nil {
			return nil, err
		}
		reply = m
	}
	var v struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  *struct {
			Message *struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		} `json:"output"`
	}
	if err := json.Unmarshal(reply, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	converse := false
	if v.Output != nil && v.Output.Message != nil {
		v.Role, v.Content, converse = v.Output.Message.Role, v.Output.Message.Content, true
	}
	if v.Role != "assistant" || len(v.Content) == 0 {
		return nil, fmt.Errorf("%w: role %q", ErrBadReply, v.Role)
	}
	converse = converse || converseReplyContent(v.Content)
	body := make([]byte, 0, len(v.Content)+48)
	body = append(body, `{"messages":[{"role":"assistant","content":`...)
	body = append(body, v.Content...)
	body = append(body, "}]}"...)
	var p Parser
	r, err := p.parseAs(body, converse, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	// A reply is judged as the reply it is: the Messages-body rule
	// (foreign.go) is about requests, so a Messages reply with a block
	// without a type stays an ordinary block here, as it always was. A
	// Converse reply must be one.
	if (!r.Bound && (r.NotMessages == "" || converse)) || len(r.Messages) != 1 {
		if r.NotMessages != "" {
			return nil, fmt.Errorf("%w: %s", ErrBadReply, r.NotMessages)
		}
		return nil, ErrBadReply
	}
	m := r.Messages[0]
	return &m, nil
}

// ReplyKeys lists the keys of the reply's signed thinking blocks.
func ReplyKeys(reply *Message) []Digest {
	var keys []Digest
	for _, b := range reply.Blocks {
		if isThinking(b.Kind) && b.Signed {
			keys = append(keys, b.Key)
		}
	}
	return keys
}

// StampReply stamps each signed thinking block of reply as minted by the
// compile rec: rec's seed and model, rec's chain as sent extended by the
// reply's frame and its earlier non-thinking blocks, and as predecessor the
// reply's previous thinking block or, for the first, rec.LastRead. It is
// the whole of "accept with the reply", and of attributing a reply seen only
// in the session file once the daemon knows which compile it answers.
func StampReply(rec *CompileRecord, reply *Message) []Stamp {
	var out []Stamp
	pred := rec.LastRead
	reply.StepFrom(rec.End, func(j int, chain Digest) {
		b := &reply.Blocks[j]
		if !isThinking(b.Kind) || !b.Signed {
			return
		}
		out = append(out, Stamp{Key: b.Key, Seed: rec.Seed, Chain: chain, Pred: pred, Model: rec.Model, Account: rec.Account})
		pred = b.Key
	})
	return out
}

// AttributeReply attributes a reply seen only in the session file (pi
// without the extension's accept). cands are the remembered compiles whose
// sent messages end at the reply's parent entry (the daemon finds them:
// pi's branch is the leaf the request was built on; custom entries are
// skipped). When they agree on what the reply was minted under, it returns
// the stamps (StampReply); when two disagree (a heartbeat and an ordinary
// round at one head) it returns a StampSkip and no stamps; with no
// candidate, neither. Stamps that already exist win (the daemon inserts
// first-wins).
func AttributeReply(cands []*CompileRecord, reply *Message) ([]Stamp, *StampSkip) {
	var c *CompileRecord
	var ids []string
	agree := true
	for _, r := range cands {
		if r == nil || r.DryRun || r.Refused {
			continue
		}
		ids = append(ids, r.ID)
		if c == nil {
			c = r
			continue
		}
		if r.Seed != c.Seed || r.End != c.End || r.LastRead != c.LastRead || NormalizeModel(r.Model) != NormalizeModel(c.Model) {
			agree = false
		}
	}
	if c == nil {
		return nil, nil
	}
	if !agree {
		return nil, &StampSkip{Message: -1, Compiles: ids}
	}
	return StampReply(c, reply), nil
}
