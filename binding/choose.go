package binding

// The kept set (design/binding.md "Then the kept set is chosen"): among the
// blocks whose individual verdict is valid, which ones the request keeps.
//
//   - Run rule, on a target that binds: the kept blocks form a chain, each
//     naming the one kept before it as its predecessor (the first may name
//     any: dropping the oldest end, the newest end or everything is
//     allowed, research 1.2).
//   - Latest assistant message: its run of thinking blocks is kept whole or
//     not at all (a partial change is a 400 on every thinking model).
//   - Choice: the longest chain, then the one ending latest. Removing the
//     whole latest run is allowed (research 1.2, section 8 scenarios
//     16-18), so after a host stripped thinking for one request (pi's
//     compaction, a retry without thinking) the older chain is kept over
//     the one-block run of the reply minted with no predecessor; before
//     issue 31 the latest run won whenever any chain kept it, and the older
//     chain was stripped as gap and released for good. One exception: in
//     manual thinking (thinking.type "enabled") inside an open tool-use
//     cycle, where the final assistant turn must begin with its thinking
//     (research 4(b)), the chain keeping the latest run wins if any does.
//   - A target that does not bind (model table: no prefix check; research
//     1.5, section 8 scenario 47) has no run rule: every valid block is
//     kept, the latest message's run whole or not at all, and no gap
//     release is recorded for it (finish; a gap release recorded for it
//     before issue 31 no longer reaches it: ReachInput.NotBinding).
//
// Decisions taken where the design and research are [INF], [CONFLICT] or
// silent (each pinned by a test in choose_test.go):
//   - Ties: between chains of one length the one ending latest wins, so
//     the chain keeping the latest run wins a tie with an older one
//     (TestChooseLongestChain).
//   - An open tool-use cycle: every message after the latest assistant
//     message is a user message whose content is tool_result blocks only
//     (cache markers aside), or a role "system" message, and at least one
//     is the former (research 4: any other user block closes the cycle;
//     whether a system message does is not documented, and taking it as
//     not closing keeps the latest run, the rule that was never refused).
//     The exception reads the host's latest assistant message only
//     (TestChooseManualOpenCycle).
//   - On a target that does not bind, the latest message's run stripped
//     because one of its blocks is not valid (released, unsigned, a
//     repeat) is reported as gap and never released; a block the run
//     rule would have cut is kept (TestChooseNotBinding).
//   - The latest message as sent: when the kept set strips the latest
//     assistant message's whole run and that message holds nothing else,
//     it is dropped, and the assistant message before it becomes the
//     latest the provider sees; the whole-or-nothing rule then moves to
//     that message, and so on (TestChooseLatestDropped). Without this a
//     chain ending inside the earlier message's run would be a partial
//     latest run once the later message is gone.
//   - A valid block the target cannot read (only possible when the target
//     does not bind, or before engagement) is kept and stands outside the
//     run: the provider drops it unread, it links nothing and breaks
//     nothing, and it is never released, so it comes back for a model that
//     reads it. In the latest message it would be a partial keep if the
//     rest of that run went: it goes too.

// choose picks the kept set among individually valid blocks (see above):
// it sets kept, and reason gap on a valid block it leaves out.
func (d *decider) choose() {
	n := len(d.tb)
	for i := range d.tb {
		d.tb[i].kept = false
	}
	if d.binds {
		d.chains()
	}
	manualOpen := d.req.Manual && openCycle(d.req, d.latest)
	latest, hi := d.latest, n
	for {
		// The latest message's thinking blocks: the last ones before hi.
		lfrom := hi
		for lfrom > 0 && d.tb[lfrom-1].msg == latest {
			lfrom--
		}
		if d.binds {
			d.keepChain(lfrom, hi, manualOpen && latest == d.latest)
		} else {
			d.keepValid(lfrom, hi)
		}
		if lfrom == hi || d.tb[lfrom].kept || contentCount(&d.req.Messages[latest]) != hi-lfrom {
			break
		}
		// The latest message's run is stripped and it held nothing else:
		// it is not sent, and the assistant message before it is the
		// latest the provider sees.
		prev := -1
		for i := latest - 1; i >= 0; i-- {
			if d.req.Messages[i].Role == "assistant" {
				prev = i
				break
			}
		}
		if prev < 0 {
			break
		}
		for i := range d.tb {
			d.tb[i].kept = false
		}
		latest, hi = prev, lfrom
	}
	for i := range d.tb {
		if t := &d.tb[i]; t.reason == "" && !t.kept {
			t.reason = ReasonGap
		}
	}
}

// cand: a block that may be in the run (valid and read by the target).
func (d *decider) cand(i int) bool { t := &d.tb[i]; return t.reason == "" && !t.unreadable }

// chains links every candidate to its parent, the last candidate before it
// whose key is its predecessor (-1: none), and gives its depth, the length
// of the longest chain ending at it.
func (d *decider) chains() {
	n := len(d.tb)
	parent := ints(d.mem.parent, n)
	depth := ints(d.mem.depth, n)
	d.mem.parent, d.mem.depth = parent, depth
	// In a chain the parent is the candidate just before, found without a
	// map; the index of every candidate's key is built only at the first
	// block whose pred is another (a long conversation's decision filled
	// it with every key, each round, to look up only its neighbour's).
	idx := d.mem.idx
	if len(idx) > 0 {
		clear(idx) // choose runs once per round of the fixed point
	}
	indexed := false
	last := -1 // the last candidate before i
	for i := 0; i < n; i++ {
		parent[i] = -1
		if !d.cand(i) {
			continue
		}
		t := &d.tb[i]
		p, ok := -1, false
		switch {
		case t.pred.IsZero():
		case last >= 0 && d.tb[last].key == t.pred:
			p, ok = last, true
		default:
			if !indexed {
				if idx == nil {
					idx = make(map[Digest]int, n)
					d.mem.idx = idx
				}
				for j := 0; j < i; j++ {
					if d.cand(j) {
						idx[d.tb[j].key] = j
					}
				}
				indexed = true
			}
			p, ok = idx[t.pred]
		}
		if ok {
			parent[i] = p
			depth[i] = depth[p] + 1
		} else {
			depth[i] = 1
		}
		if indexed {
			idx[t.key] = i
		}
		last = i
	}
}

// keepChain keeps, on a target that binds, the chosen chain among the
// blocks before hi, the latest message's run being [lfrom, hi); with
// latestFirst (manual thinking in an open tool-use cycle) the chain keeping
// that run wins if there is one. A valid unreadable block (before
// engagement) is kept outside the run.
func (d *decider) keepChain(lfrom, hi int, latestFirst bool) {
	parent, depth := d.mem.parent, d.mem.depth
	whole := lfrom < hi
	for i := lfrom; whole && i < hi; i++ {
		whole = d.cand(i) && (i == lfrom || parent[i] == i-1)
	}
	best, end := 0, -1
	for i := 0; i < lfrom; i++ {
		if d.cand(i) && depth[i] >= best {
			best, end = depth[i], i
		}
	}
	if whole && (latestFirst || depth[hi-1] >= best) {
		end = hi - 1
	}
	for i := end; i >= 0; i = parent[i] {
		d.tb[i].kept = true
	}
	for i := 0; i < hi; i++ {
		if t := &d.tb[i]; t.reason == "" && t.unreadable {
			t.kept = true
		}
	}
	d.wholeLatest(lfrom, hi)
}

// keepValid keeps, on a target that does not bind, every valid block before
// hi, the latest message's run [lfrom, hi) whole or not at all.
func (d *decider) keepValid(lfrom, hi int) {
	for i := 0; i < hi; i++ {
		d.tb[i].kept = d.tb[i].reason == ""
	}
	d.wholeLatest(lfrom, hi)
}

// wholeLatest un-keeps the run [lfrom, hi) unless all of it is kept.
func (d *decider) wholeLatest(lfrom, hi int) {
	for i := lfrom; i < hi; i++ {
		if !d.tb[i].kept {
			for k := lfrom; k < hi; k++ {
				d.tb[k].kept = false
			}
			return
		}
	}
}

// openCycle reports whether the request continues a tool-use cycle (see
// the head comment): after the latest assistant message, only user
// messages of tool_result blocks and role "system" messages, at least one
// of the former.
func openCycle(r *Request, latest int) bool {
	if latest < 0 {
		return false
	}
	results := false
	for i := latest + 1; i < len(r.Messages); i++ {
		m := &r.Messages[i]
		switch {
		case m.Role == "system":
		case m.Role == "user" && toolResults(m):
			results = true
		default:
			return false
		}
	}
	return results
}

// toolResults reports whether m's content is tool_result blocks only
// (markers aside), at least one.
func toolResults(m *Message) bool {
	n := 0
	for j := range m.Blocks {
		switch b := &m.Blocks[j]; {
		case b.Kind == KindMarker:
		case !b.Result:
			return false
		default:
			n++
		}
	}
	return n > 0
}
