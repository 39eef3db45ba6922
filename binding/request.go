// Package binding is bindery's pure core: the canonical form and message
// chain of an Anthropic Messages request, stamps, releases, and the decision
// of which signed thinking blocks a request may carry. It does no I/O, reads
// no clock and runs no SQL: everything it decides is a function of its
// inputs. See ../shared/design/binding.md (the specification).
package binding

// Digest is a SHA-256 value.
type Digest [32]byte

// IsZero reports whether d is the zero digest (used for "none").
func (d Digest) IsZero() bool { return d == Digest{} }

// BlockKind classifies a content block for the binding pass.
type BlockKind uint8

const (
	KindOther      BlockKind = iota // anything that is not thinking: part of the chain
	KindThinking                    // "thinking": outside the chain, bound by its signature
	KindRedacted                    // "redacted_thinking": outside the chain, bound by its data
	KindCompaction                  // "compaction": in the chain, and the chain restarts at it (see Compaction for the kept turns after it)
	KindMarker                      // Converse "cachePoint": a prompt-cache marker, not content: outside the chain, never stripped, not counted as sent (converse.go)
)

// Span is a half-open byte range [Start, End) of the request body.
type Span struct{ Start, End int }

// Block is one element of a message's content array, as the host gave it.
type Block struct {
	Kind   BlockKind
	Span   Span   // the element's value in the body
	Digest Digest // canonical digest of the block (cache_control markers excluded); zero for thinking
	Chain  Digest // chain(b): the message chain just before this block (for a compaction block: before the reset)
	Key    Digest // thinking: SHA-256 of signature; redacted: SHA-256 of data; zero otherwise
	Signed bool   // thinking with a non-empty signature, redacted with non-empty data, or compaction with a non-empty signature
	Result bool   // a "tool_result" block (Converse: {toolResult}); a user message of these alone continues a tool-use cycle (choose.go)
	Tokens int    // estimated tokens of the block (for reports)
}

// Message is one element of the request's messages array.
type Message struct {
	Role   string
	Span   Span    // the element's value in the body
	Frame  Digest  // canonical digest of the message without its content's blocks (role, other fields, content shape)
	Blocks []Block // nil when content is not an array (a string is part of Frame); empty for []
	End    Digest  // the message chain after this message
}

// Request is a parsed request body: an Anthropic Messages body, or a Bedrock
// Converse body (Converse true; converse.go says how its shape maps onto
// these fields), read by one decision. Indices into Messages
// and Blocks are the host's original indices (messages.N.content.M).
type Request struct {
	Bound bool // false: no messages array, or another API's body (NotMessages); the plan is empty
	// NotMessages says why a body with a messages array is another API's
	// (IsMessagesBody): "" for a Messages body and for one without messages.
	NotMessages string
	// Converse: the body is a Bedrock Converse request (converse.go).
	Converse bool
	Model    string // the "model" field (Converse: "modelId")
	// Manual: thinking.type is "enabled" (Converse: in
	// additionalModelRequestFields), manual thinking, where the final
	// assistant turn of an open tool-use cycle must begin with its
	// thinking (choose.go).
	Manual   bool
	Seed     Digest // system + non-deferred tools, as values
	Messages []Message

	// thinking is where Messages' thinking blocks are, in request order,
	// as a parse found them (nil: not recorded; thinkingBlocks finds them).
	// A long history's decision walked every block of every message
	// several times over to find its few thinking blocks.
	thinking []thinkingAt
}

// thinkingAt is where a thinking block is: its message and its index in
// that message's Blocks.
type thinkingAt struct{ msg, blk int32 }

// thinkingBlocks is where r's thinking blocks are, in request order.
func (r *Request) thinkingBlocks() []thinkingAt {
	if r.thinking != nil {
		return r.thinking
	}
	return appendThinking(nil, r.Messages, 0)
}

// appendThinking appends to out where the thinking blocks of msgs[from:]
// are.
func appendThinking(out []thinkingAt, msgs []Message, from int) []thinkingAt {
	for i := from; i < len(msgs); i++ {
		for j := range msgs[i].Blocks {
			if isThinking(msgs[i].Blocks[j].Kind) {
				out = append(out, thinkingAt{int32(i), int32(j)})
			}
		}
	}
	return out
}
