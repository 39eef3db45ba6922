package judgetest

import (
	"fmt"
	"strings"
)

// DropScope is what "drop_block" removes besides the failing block. The
// September overview and the later SDK docstrings disagree (research 2.3,
// [CONFLICT]), so the judge runs under either.
type DropScope uint8

const (
	// DropRestOfTurn removes the failing block plus the rest of that turn's
	// consecutive thinking blocks; later turns are judged on their own merits
	// (SDK docstrings).
	DropRestOfTurn DropScope = iota
	// DropAllLater removes the failing block and every later thinking block
	// (September overview).
	DropAllLater
)

func (s DropScope) String() string {
	if s == DropAllLater {
		return "all-later"
	}
	return "rest-of-turn"
}

// Reading fixes every rule the research tags [INF] or [CONFLICT]. A suite
// that wants to hold under the provider's real behaviour runs under each of
// Readings().
type Reading struct {
	// Mythos51Binds: the November docs say Mythos 5.1 returns the 400 on
	// every account; the September docs and Bedrock say it does not run the
	// check at all [CONFLICT]. Its blocks carry a conversation record either way.
	Mythos51Binds bool
	// Scope of drop_block [CONFLICT].
	Scope DropScope
	// DroppedCountsAsRead: a block removed by drop_block still counts as the
	// predecessor of the next block read (in the same request's run check and
	// for the blocks the reply mints) [INF]. Blocks dropped by the model check
	// never count: the model did not read them.
	DroppedCountsAsRead bool
	// Opus55ToFable51: Fable 5.1 / Mythos 5.1 read Opus 5.5 blocks "on the
	// Claude API only"; false is the reading for Bedrock/Vertex [DOC/INF].
	Opus55ToFable51 bool
	// ThinkingEditAccepted: docs say an edited thinking text is a 400; the
	// probe saw it accepted [CONFLICT]. Text put into an empty (omitted)
	// block's field is ignored in both readings.
	ThinkingEditAccepted bool
	// Fable52ReadsOlder: which models Fable 5.2 / Mythos 5.2 read is not
	// listed; false assumes only their own pair [INF].
	Fable52ReadsOlder bool
	// Sonnet55ReadsOlder: Sonnet 5.5's read set is not detailed; false
	// assumes it reads only its own blocks (and Haiku 5.5's) [INF].
	Sonnet55ReadsOlder bool
}

// Documented is the reading that follows the newest document on each point:
// Mythos 5.1 binds (Nov docs), rest-of-turn scope (SDK), dropped blocks are
// not read, Claude API platform, edits refused (docs), unlisted reads absent.
func Documented() Reading {
	return Reading{Mythos51Binds: true, Scope: DropRestOfTurn, Opus55ToFable51: true}
}

// Readings enumerates every combination of the switches (128 readings),
// Documented() first.
func Readings() []Reading {
	out := []Reading{Documented()}
	for bits := 0; bits < 128; bits++ {
		r := Reading{
			Mythos51Binds:        bits&1 != 0,
			Scope:                DropScope(bits >> 1 & 1),
			DroppedCountsAsRead:  bits&4 != 0,
			Opus55ToFable51:      bits&8 != 0,
			ThinkingEditAccepted: bits&16 != 0,
			Fable52ReadsOlder:    bits&32 != 0,
			Sonnet55ReadsOlder:   bits&64 != 0,
		}
		if r != out[0] {
			out = append(out, r)
		}
	}
	return out
}

func (r Reading) String() string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	return fmt.Sprintf("mythos51binds=%s scope=%s droppedread=%s opus55>fable51=%s editok=%s fable52older=%s sonnet55older=%s",
		b(r.Mythos51Binds), r.Scope, b(r.DroppedCountsAsRead), b(r.Opus55ToFable51), b(r.ThinkingEditAccepted),
		b(r.Fable52ReadsOlder), b(r.Sonnet55ReadsOlder))
}

// family groups models for the read rules of research 1.5 and 3.
type family uint8

const (
	famFableMythos family = iota // Fable / Mythos line
	famOSH                       // Opus / Sonnet / Haiku line
)

// model is one row of research 1.5.
type model struct {
	name    string
	fam     family
	release int  // release order (yyyymmdd); "earlier model" means a smaller value
	binds   bool // runs the prefix check (Mythos 5.1 depends on the reading)
	bound   bool // its blocks carry a record of the conversation
	// enforcedAlways: unset prefix_mismatch_behavior is a 400 on every
	// account (Fable 5.2 / Mythos 5.2; Mythos 5.1 under the November reading).
	enforcedAlways bool
}

var models = map[string]model{
	"claude-fable-5-2":  {"claude-fable-5-2", famFableMythos, 20261109, true, true, true},
	"claude-mythos-5-2": {"claude-mythos-5-2", famFableMythos, 20261109, true, true, true},
	"claude-haiku-5-5":  {"claude-haiku-5-5", famOSH, 20261007, true, true, false},
	"claude-sonnet-5-5": {"claude-sonnet-5-5", famOSH, 20260928, true, true, false},
	"claude-opus-5-5":   {"claude-opus-5-5", famOSH, 20260921, true, true, false},
	"claude-fable-5-1":  {"claude-fable-5-1", famFableMythos, 20260901, true, true, false},
	"claude-mythos-5-1": {"claude-mythos-5-1", famFableMythos, 20260901, true, true, true},
	"claude-fable-5":    {"claude-fable-5", famFableMythos, 20260609, false, false, false},
	"claude-mythos-5":   {"claude-mythos-5", famFableMythos, 20260609, false, false, false},
	"claude-opus-5":     {"claude-opus-5", famOSH, 20260501, false, false, false},
	"claude-sonnet-5":   {"claude-sonnet-5", famOSH, 20260501, false, false, false},
	"claude-opus-4-8":   {"claude-opus-4-8", famOSH, 20260201, false, false, false},
	"claude-haiku-4-5":  {"claude-haiku-4-5", famOSH, 20251001, false, false, false},
}

// accountBound lists the models whose blocks are read only in the account
// that minted them (research 1.5 and 3; Haiku 5.5's linked accounts are
// not modelled: every account is its own).
var accountBound = map[string]bool{"claude-sonnet-5-5": true, "claude-haiku-5-5": true}

// Models lists the model names the judge knows.
func Models() []string {
	out := make([]string, 0, len(models))
	for n := range models {
		out = append(out, n)
	}
	return out
}

// runsCheck reports whether the target model evaluates the prefix binding.
func (r Reading) runsCheck(m model) bool {
	if m.name == "claude-mythos-5-1" {
		return r.Mythos51Binds
	}
	return m.binds
}

// reads reports whether reader can read blocks minted by minter (the model
// check; an unreadable block is always dropped, never refused).
func (r Reading) reads(reader, minter model) bool {
	if reader.name == minter.name {
		return true
	}
	switch reader.name {
	case "claude-fable-5-2", "claude-mythos-5-2":
		if minter.name == "claude-fable-5-2" || minter.name == "claude-mythos-5-2" {
			return true
		}
		return r.Fable52ReadsOlder && minter.release < reader.release
	case "claude-fable-5-1", "claude-mythos-5-1":
		switch {
		case minter.name == "claude-fable-5-1" || minter.name == "claude-mythos-5-1":
			return true
		case minter.name == "claude-opus-5-5":
			return r.Opus55ToFable51
		case minter.name == "claude-haiku-5-5":
			return true // Haiku 5.5 blocks are not model-locked (Bedrock)
		}
		return minter.release < reader.release
	case "claude-opus-5-5":
		if minter.name == "claude-haiku-5-5" {
			return true
		}
		return minter.fam == famOSH && minter.release < reader.release
	case "claude-sonnet-5-5":
		if minter.name == "claude-haiku-5-5" {
			return true
		}
		return r.Sonnet55ReadsOlder && minter.fam == famOSH && minter.release < reader.release
	case "claude-haiku-5-5":
		return false // drops other models' blocks (Bedrock)
	}
	// Models without the check still run the model check: they read blocks
	// of models without the check, not the binding generation's (an Opus 5.5
	// block was dropped on Sonnet 5); Haiku 5.5 blocks replay anywhere.
	return !minter.bound || minter.name == "claude-haiku-5-5"
}

// lookup finds a model by the id a request names: a Bedrock-style
// "[region.]anthropic." prefix, a "-v<N>[:<M>]" suffix or a Vertex "@..."
// suffix are route spellings of the same model (the route itself is the
// reading's business, see Reading.Opus55ToFable51).
func lookup(id string) (model, bool) {
	if i := strings.Index(id, "anthropic."); i >= 0 {
		id = id[i+len("anthropic."):]
	}
	if i := strings.IndexByte(id, '@'); i >= 0 {
		id = id[:i]
	}
	if i := strings.IndexByte(id, ':'); i >= 0 {
		id = id[:i]
	}
	if i := strings.LastIndex(id, "-v"); i >= 0 && i+2 < len(id) && strings.Trim(id[i+2:], "0123456789") == "" {
		id = id[:i]
	}
	if i := len(id) - 9; i > 0 && id[i] == '-' && strings.Trim(id[i+1:], "0123456789") == "" {
		id = id[:i] // a dated id: claude-haiku-4-5-20251001
	}
	m, ok := models[id]
	return m, ok
}
