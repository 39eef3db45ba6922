package binding

import (
	"errors"
	"strconv"
)

// This file holds the plain values the decision reads and writes: what the
// daemon loads for one compile or accept, and what it persists. None of them
// holds a pointer into a request body, so db/ can store them and the daemon
// can reload them after a restart.

// Reason says why a thinking block was stripped (api.md "reason").
type Reason string

const (
	// ReasonReleased: the branch released the block earlier.
	ReasonReleased Reason = "released"
	// ReasonModelUnreadable: the target model cannot read the minting
	// model's blocks. Not a release: the block comes back with the model.
	ReasonModelUnreadable Reason = "model-unreadable"
	// ReasonModelUnbound: the target binds and the minting model does not
	// (its blocks carry no record of a conversation). A release.
	ReasonModelUnbound Reason = "model-unbound"
	// ReasonNoStamp: no stamp, after attribution by prefix. A release.
	ReasonNoStamp Reason = "no-stamp"
	// ReasonPrefixChanged: the message chain before the block differs from
	// its stamp's. A release.
	ReasonPrefixChanged Reason = "prefix-changed"
	// ReasonSeedChanged: same chain, other system/tools. Not a release: the
	// block comes back when the seed does.
	ReasonSeedChanged Reason = "seed-changed"
	// ReasonGap: individually valid, but outside the chosen run (run rule,
	// latest-assistant-message rule). A release.
	ReasonGap Reason = "gap"
	// ReasonAccountMismatch: the block's model binds its blocks to the
	// account that minted them (ModelRule.AccountBound), and this request
	// is sent under another credential. Not a release: the block comes
	// back under its own credential.
	ReasonAccountMismatch Reason = "account-mismatch"
	// ReasonUnsigned: a thinking block with an empty signature (or redacted
	// thinking with empty data). The provider refuses it on every model, so
	// it is stripped even when nothing else is (decision: bindery had the
	// fact). It has no key, so it is never released or stamped.
	ReasonUnsigned Reason = "unsigned"
)

// Releases reports whether a strip for this reason becomes a release of the
// block on the branch when its compile is accepted.
func (r Reason) Releases() bool {
	switch r {
	case ReasonNoStamp, ReasonPrefixChanged, ReasonModelUnbound, ReasonGap:
		return true
	}
	return false
}

// Stamp is recorded once per thinking block, keyed by Key (the digest of its
// signature, or of data for redacted thinking): what the provider bound the
// block to when it was minted. Stamps are global (every branch and
// conversation that replays the block shares it) and never change: the first
// stamp recorded for a key wins.
type Stamp struct {
	Key   Digest // the block
	Seed  Digest // system + non-deferred tools of the minting request
	Chain Digest // message chain just before the block, as the minting request was sent and the reply grew it
	Pred  Digest // key of the thinking block the model read just before this one; zero: none
	Model string // the minting model, as the request named it
	// Account is the salted fingerprint of the credential the minting
	// request was sent under (api.AccountFingerprint); "" when unknown
	// (pi's sessions, a host that sends none).
	Account string
}

// Release is a branch's permanent decision never to send a block again. The
// decision fills Key, Reason, Compile, Message and Path; the daemon scopes it
// (conversation, branch, pi leaf and entry) and sets Seq when it records it.
type Release struct {
	Key     Digest
	Reason  string // a strip Reason that releases, or "provider" (input_transformations) or "host" (a 400 the host reported)
	Compile string // the compile whose request held the block ("" for a release by signature)
	Message int    // the block's message index in that compile's request as the host gave it; -1 when unknown
	Path    string // messages.N.content.M in that request as the host gave it; "" when unknown
	Seq     int64  // the daemon's own monotonic sequence when it recorded the release (forks compare it)
}

// Release reasons that are not strip reasons.
const (
	ReleaseProvider = "provider" // input_transformations: thinking_dropped, prefix_binding_mismatch
	ReleaseHost     = "host"     // a 400 naming messages.N.content.M, via /v1/release
)

// Compaction is bindery's record of an on-demand compaction block
// (preserved-thinking.md 6, "Compaction"; the provider's page
// compaction-thinking-blocks): the block a compaction request returns, which
// the host then sends as the first message in place of exactly the messages
// of that request. The provider accepts the swap for the thinking of the
// turns kept after it, so bindery must know what the block stands for: the
// compaction request's message chain as sent. Recorded at the accept of the
// compaction request's compile (the reply is the block), keyed by the
// block's canonical digest, first-wins and never changed, like a stamp.
type Compaction struct {
	Key      Digest // Block.Digest of the compaction block (its content and signature; cache_control excluded)
	Chain    Digest // the compaction request's message chain as sent (its compile's End): what the block replaced
	Seed     Digest // the compaction request's seed: kept thinking holds only if it was minted under the same one
	LastRole string // role of the last message replaced: the first kept message must differ (else the API merges them)
	Compile  string // the compile whose reply the block was
	// Through: when the compaction request itself began with an earlier
	// compaction block bindery vouched for, what the block replaced with
	// that earlier block expanded (then with the one before it, and so on,
	// nearest first, at most MaxThrough): the chains a turn kept through
	// several compactions in a row was minted under (CompileRecord.Through).
	Through []Digest
}

// KeptBlock is a thinking block a compile sent, in request order.
type KeptBlock struct {
	Key        Digest
	Orig       Pos  // position in the request as the host gave it
	Sent       Pos  // position in the request as sent (input_transformations paths)
	Unreadable bool // the target model cannot read it (kept only when the target does not bind): not a predecessor
}

// Pos is a content block position: messages.Message.content.Block.
type Pos struct{ Message, Block int }

// Path renders the position the way the provider and api.md do.
func (p Pos) Path() string {
	return "messages." + strconv.Itoa(p.Message) + ".content." + strconv.Itoa(p.Block)
}

// MessagePath renders a message position ("messages.N").
func MessagePath(n int) string { return "messages." + strconv.Itoa(n) }

// SentMessage is one message as a compile sent it, reduced to what the next
// compile needs to find the first change against it (cache.firstChange):
// 8-byte prefixes of its frame and of each sent block's identity (the block
// digest, or the key for thinking). A collision only misplaces a report.
type SentMessage struct {
	Orig   int      // index in the request as the host gave it
	Frame  uint64   // prefix of Message.Frame
	Blocks []uint64 // sent blocks, in order; nil for string content
}

// CompileRecord is what bindery remembers of a compile: everything attribution,
// stamping at accept, releases, input_transformations mapping and the next
// compile's cache.firstChange need. Its size is bounded by the request's
// (about 8 bytes per content block and 80 per kept thinking block).
type CompileRecord struct {
	ID           string
	Conversation string
	Branch       string // pi: the leaf entry id; other hosts: the branch name
	Seq          int64  // the daemon's monotonic compile sequence (orders compiles; no clock)
	Model        string // request.model
	Account      string // the credential's salted fingerprint the request is sent under; "" unknown
	Binds        bool   // the compile's target binds thinking
	Engaged      bool   // the conversation was engaged when the compile was decided
	DryRun       bool   // decided and reported only; never accepted, never persisted
	Accepted     bool
	// Refused: the provider refused this compile's request (a 400 the host
	// reported: the daemon stores MarkRefused(rec)), so it minted nothing:
	// attribution ignores it, which keeps a refused compile and its retry
	// at one head from making the retry's reply unattributable.
	Refused bool

	Seed     Digest        // the request's seed
	End      Digest        // message chain at the end of what was sent
	LastRole string        // role of the last message sent ("" when none): what an on-demand compaction of this request ends on
	Through  []Digest      // End with the request's compaction block expanded, and each before it (Compaction.Through); nil: none
	LastRead Digest        // key of the last thinking block the target read (zero: none); at accept, provider drops are subtracted
	Kept     []KeptBlock   // thinking blocks sent, in order
	Sent     []SentMessage // messages sent, in order
	Strips   []Release     // strips that become releases if this compile is accepted
}

// ThinkingAt maps a thinking block position in the request as sent (an
// input_transformations or 400 path) back to the block the compile kept.
func (r *CompileRecord) ThinkingAt(sent Pos) (KeptBlock, bool) {
	if k := r.keptAt(sent); k >= 0 {
		return r.Kept[k], true
	}
	return KeptBlock{}, false
}

// keptAt returns the index in r.Kept of the thinking block sent at p, or -1.
func (r *CompileRecord) keptAt(p Pos) int {
	for i, k := range r.Kept {
		if k.Sent == p {
			return i
		}
	}
	return -1
}

// Errors with stable codes the api maps to statuses.
var (
	// ErrUnknownCompile: the compile id is unknown or forgotten (404 unknown-compile).
	ErrUnknownCompile = &Error{Code: "unknown-compile", Msg: "unknown or forgotten compile"}
	// ErrDryRun: the compile was a dry run and cannot be accepted (409 dry-run).
	ErrDryRun = &Error{Code: "dry-run", Msg: "a dry-run compile cannot be accepted"}
	// ErrBadPath: a path is not messages.N.content.M, or names no thinking block the compile sent (400 bad-path).
	ErrBadPath = &Error{Code: "bad-path", Msg: "path names no thinking block the compile sent"}
	// ErrBadReply: the reply is not an assistant message in the provider's wire shape (400 bad-reply).
	ErrBadReply = &Error{Code: "bad-reply", Msg: "reply is not an assistant message"}
	// ErrNoRequest: a compile was asked without a parsed request (400 bad-request).
	ErrNoRequest = &Error{Code: "bad-request", Msg: "no request"}
)

// Error is a binding error with a stable code. Wrapped errors keep the
// sentinel reachable with errors.Is.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Code returns the stable code of the first *Error in err's chain, or "".
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
