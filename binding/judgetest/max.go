package judgetest

import "fmt"

// The most a host-side component could keep: the largest number of a
// request's thinking blocks the provider would read, were the host free to
// strip any of them and nothing else. Written from the research alone, as a
// second reading of the rules bindery's choice follows (research 1.2, 1.5,
// 4(b), section 8 scenarios 16-19 and 47):
//   - a block counts only if it passes every individual check (Facts'
//     Valid: its signature, the model check, and on a target that runs the
//     prefix check its system, tools, messages and conversation record);
//   - on a target that runs the prefix check, the blocks read form one run:
//     each names the block read just before it as its predecessor, the
//     first may name any (removing from the start, from the end, or all is
//     allowed); a target that does not run the check has no run rule;
//   - the latest assistant message's thinking blocks are sent all or none,
//     and all only when each of them is signed and, where the target reads
//     it, valid (the run inside it included): blocks the model check drops
//     are sent and not read;
//   - in manual thinking (thinking.type "enabled") inside an open tool-use
//     cycle the final assistant turn must begin with its thinking (4(b)):
//     when some run keeps the latest message's blocks, the kept run is one
//     of those.

// Max is the most thinking blocks of body the provider would read, by the
// rules above: the measure of what a host-side component could keep.
func (j *Judge) Max(body []byte) (int, error) { return j.MaxAs("", body) }

// MaxAs is Max for a request sent in account (Call.Account).
func (j *Judge) MaxAs(account string, body []byte) (int, error) {
	p, early := j.parse(body)
	if early != nil {
		return 0, fmt.Errorf("max: %s", early.Error)
	}
	facts, err := j.FactsAs(account, body)
	if err != nil {
		return 0, err
	}
	checked := j.reading.runsCheck(p.model)
	// The latest assistant message's blocks: the last sites, in order.
	lfrom := len(facts)
	for lfrom > 0 && facts[lfrom-1].Path.Message == p.latest {
		lfrom--
	}
	read := func(f BlockFacts) bool { return f.Valid() }
	if !checked {
		n := 0
		for _, f := range facts[:lfrom] {
			if read(f) {
				n++
			}
		}
		latest, ok := 0, true
		for _, f := range facts[lfrom:] {
			switch {
			case !f.SigOK:
				ok = false
			case f.Readable && !read(f):
				ok = false
			case f.Readable:
				latest++
			}
		}
		if ok {
			n += latest
		}
		return n, nil
	}
	// best[i]: the longest run read that ends at block i (0: i is not read).
	best := make([]int, len(facts))
	for i, f := range facts[:lfrom] {
		if !read(f) {
			continue
		}
		best[i] = 1
		for k := 0; k < i; k++ {
			if best[k] > 0 && f.HasPred && f.Pred == facts[k].Key && best[k]+1 > best[i] {
				best[i] = best[k] + 1
			}
		}
	}
	without := 0
	for _, b := range best[:lfrom] {
		without = max(without, b)
	}
	// The latest message's run kept whole: its readable blocks each valid,
	// each naming the one before; the first joins the longest run it can.
	with, ok := 0, lfrom < len(facts)
	var prev *BlockFacts
	for i := lfrom; ok && i < len(facts); i++ {
		f := &facts[i]
		switch {
		case !f.SigOK || (f.Readable && !read(*f)):
			ok = false
		case !f.Readable:
		case prev == nil:
			with = 1
			for k := 0; k < lfrom; k++ {
				if best[k] > 0 && f.HasPred && f.Pred == facts[k].Key && best[k]+1 > with {
					with = best[k] + 1
				}
			}
			prev = f
		case !f.HasPred || f.Pred != prev.Key:
			ok = false
		default:
			with++
			prev = f
		}
	}
	if ok && prev == nil {
		with = without // the latest message's blocks are all dropped unread
	}
	switch {
	case !ok:
		return without, nil
	case p.manual && p.open:
		return with, nil
	}
	return max(with, without), nil
}
