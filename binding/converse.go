package binding

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Bedrock Converse requests (Claude on Amazon Bedrock; pi 1.6's
// amazon-bedrock provider, api bedrock-converse-stream), read into the same
// Request the Messages reader fills, so that the one decision (decide.go),
// the one rewrite (rewrite.go) and the one accept (accept.go) serve both.
// The shape:
//
//	{"modelId": "us.anthropic.claude-opus-5-5",
//	 "system": [{"text": "..."}, {"cachePoint": {"type": "default"}}],
//	 "toolConfig": {"tools": [{"toolSpec": {...}}, {"cachePoint": {...}}], "toolChoice": {...}},
//	 "messages": [{"role": "user" | "assistant", "content": [ContentBlock, ...]}],
//	 "inferenceConfig": {...}, "additionalModelRequestFields": {...}, ...}
//
// A ContentBlock is a union keyed by its one member: {text}, {image},
// {document}, {toolUse}, {toolResult}, {cachePoint}, {reasoningContent:
// {reasoningText: {text, signature}} | {redactedContent: <bytes>}}, ...
//
// How it maps onto the Request (pinned by the Converse golden vectors):
//   - Model is modelId. The seed covers system and toolConfig.tools, as
//     values, with their cachePoint elements left out (markers), and the
//     system and tools members of additionalModelRequestFields when there
//     are any (Bedrock passes that object into the model's own request:
//     computer-use tools are given there); toolConfig.toolChoice and the
//     rest of additionalModelRequestFields (thinking, output_config, the
//     betas) are outside it, as Messages' tool_choice and thinking are. The
//     seed is framed with its own kind, so a Converse seed never equals a
//     Messages seed.
//   - A message frame is the message with its content array replaced by []
//     (as for Messages). Each content block is canonicalized whole, in data
//     mode (a key named cache_control inside a Converse block is data:
//     Converse has no such marker).
//   - reasoningContent.reasoningText is a thinking block, keyed by its
//     signature; reasoningContent.redactedContent is redacted thinking,
//     keyed by the bytes as their base64 text (AWS JSON's encoding of a
//     blob, the text a Messages body carries as data), so one block keeps
//     its key across the two routes. Neither is in the chain. A
//     reasoningContent of any other form is content (kept, in the chain):
//     bindery never cuts what it cannot read.
//   - A cachePoint block is a marker (KindMarker): not in the chain, never
//     stripped, and not counted as content: a message left holding only
//     markers after a strip is dropped, and markers take no place in the
//     positions the compile record keeps as sent.
//
// Where Bedrock's documentation is silent, these are our choices:
//   - Bedrock's "Preserved thinking" page (userguide
//     claude-messages-thinking-block-binding) describes the model, prefix
//     and organization checks, and that the field and the beta go through
//     additionalModelRequestFields, but not where a Converse response
//     reports input_transformations. Converse returns fields of the model's
//     own response that the request names in additionalModelResponseFieldPaths
//     (JSON Pointers, e.g. "/stop_sequence"; a valid pointer to an absent
//     field is ignored) in additionalModelResponseFields: the top level of a
//     Converse response, the messageStop event of a ConverseStream. So a host
//     asks for "/input_transformations" and reads it there
//     (InputTransformationsOf).
//   - The paths in input_transformations, and in a refusal, name a block of
//     the model's own (Messages) request, which Bedrock builds from the
//     Converse one: message N is Converse message N, and block M counts the
//     message's content blocks without its cachePoint blocks (a cachePoint
//     becomes a cache marker on the block before it, taking no place). The
//     compile record keeps sent positions that way. For a body like pi's,
//     whose cachePoint blocks come after every other block of a message, the
//     two ways of counting agree.
//   - A refusal reads as a ValidationException whose message carries the
//     provider's text (`messages.N.content.M: Invalid `signature` in
//     `thinking` block. The block is bound to a different conversation.
//     ...`). Bedrock's pages show no such error; Bedrock's
//     ValidationExceptions seen in the wild carry the model's own message
//     with its own paths (InvokeModelWithResponseStream: "messages.N.
//     content.M.type: Expected `thinking` ..."), beside Converse's own
//     checks, which name no path ("If an assistant message contains any
//     thinking blocks, the first block must be thinking"). So hosts match
//     the text as on Anthropic's API and release at that path.
//   - The redacted bytes' base64 text equals the data a Messages body
//     carries when both are standard padded base64 (AWS JSON's, and
//     Anthropic's as seen); a host that writes another base64 form costs a
//     strip, never a refusal.
//
// Sources (read 2026-12-02 through the search index): Bedrock user guide
// claude-messages-thinking-block-binding ("Preserved thinking": the three
// checks; Fable 5.1 runs the prefix check, Mythos 5.1 records it only; the
// organization check removes blocks of another account or minted in
// claude.ai or Claude Code); API reference ReasoningTextBlock (the
// signature must be sent back with the earlier messages, which must not
// change); the SDKs' ConverseRequest.additionalModelResponseFieldPaths and
// API_runtime_MessageStopEvent (additionalModelResponseFields on
// messageStop).

// errReadAsConverse asks Parse for a second pass in Converse mode.
var errReadAsConverse = errors.New("read the body as Converse")

// whyUntyped is the reason a typeless content block gives in a Messages read.
const whyUntyped = "a content block without a string type"

// kindSeedConverse frames a Converse seed (see kindSeed).
const kindSeedConverse byte = 9

// converseTopKey reports whether a top-level member is one only Converse
// defines: its presence makes the body read as Converse.
func converseTopKey(key []byte) bool {
	switch string(key) {
	case "modelId", "inferenceConfig", "toolConfig", "additionalModelRequestFields",
		"additionalModelResponseFieldPaths", "guardrailConfig", "promptVariables", "performanceConfig", "requestMetadata":
		return true
	}
	return false
}

func (p *Parser) modelKey() string {
	if p.converse {
		return "modelId"
	}
	return "model"
}

// converseSeedDigest is seedDigest for a Converse body, under its own kind,
// with the prefix members of additionalModelRequestFields (native) when
// there are any.
func converseSeedDigest(hasSys bool, sys Digest, hasTools bool, tools Digest, hasNative bool, native Digest) Digest {
	d := seedDigest(hasSys, sys, hasTools, tools)
	var buf [4 + 1 + 32 + 32]byte
	binary.BigEndian.PutUint32(buf[0:4], FramingVersion)
	buf[4] = kindSeedConverse
	copy(buf[5:], d[:])
	n := 4 + 1 + 32
	if hasNative {
		copy(buf[n:], native[:])
		n += 32
	}
	return sha256.Sum256(buf[:n])
}

// validatedValue validates the value at c.pos whole, writing nothing: it
// lies at c.in[start:end], c.pos is left at end, out is back at mark, and
// obj says whether it is an object (the caller then reads its members).
func (c *canon) validatedValue() (start, end, mark int, obj bool, err error) {
	start, mark = c.pos, len(c.out)
	if err := c.value(); err != nil {
		return 0, 0, 0, false, err
	}
	c.out = c.out[:mark]
	return start, c.pos, mark, c.in[start] == '{', nil
}

// converseNativeFields reads the additionalModelRequestFields value at
// c.pos (validated whole) and digests its members that Bedrock passes into
// the model's own request as part of the prefix: "system" and "tools" (as
// Bedrock's computer-use tools are given: Anthropic tool definitions beside
// toolConfig's). Every other member (thinking, output_config,
// anthropic_beta, ...) is outside the prefix. has is false when neither is
// there: the seed is then as if the value had none.
func (p *Parser) converseNativeFields() (d Digest, has bool, err error) {
	c := &p.c
	start, end, mark, obj, err := c.validatedValue()
	if err != nil || !obj {
		return Digest{}, false, err
	}
	// The members in key order (system before tools), each framed apart.
	var parts [2]Digest
	var seen [2]bool
	for key, v, _, i, ok := nextMember(c.in, start+1); ok; key, v, _, i, ok = nextMember(c.in, i) {
		if rawKeyIs(key, "thinking") {
			p.manual = manualThinking(c.in, v)
		}
		k := -1
		switch {
		case rawKeyIs(key, "system"):
			k = 0
		case rawKeyIs(key, "tools"):
			k = 1
		}
		if k < 0 {
			continue
		}
		c.pos = v
		hdr := c.reserveHeader()
		if err := c.value(); err != nil {
			return Digest{}, false, err
		}
		parts[k], seen[k] = p.digest(hdr, kindValue), true
		c.out = c.out[:mark]
	}
	c.pos, c.out = end, c.out[:mark]
	if !seen[0] && !seen[1] {
		return Digest{}, false, nil
	}
	return seedDigest(seen[0], parts[0], seen[1], parts[1]), true, nil
}

// converseSeedPart digests the system value at c.pos: an array without its
// cachePoint elements, any other value as data.
func (p *Parser) converseSeedPart(isArr bool, kind byte) (Digest, error) {
	c := &p.c
	hdr := c.reserveHeader()
	var err error
	if isArr {
		err = c.converseMarkedArray()
	} else {
		err = c.value()
	}
	if err != nil {
		return Digest{}, err
	}
	return p.digest(hdr, kind), nil
}

// converseToolConfig reads the toolConfig value at c.pos (validated whole,
// duplicates refused) and digests its tools member: the tools part of the
// seed. has is false when there is no tools member.
func (p *Parser) converseToolConfig() (d Digest, has bool, err error) {
	c := &p.c
	start, end, mark, obj, err := c.validatedValue()
	if err != nil || !obj {
		return Digest{}, false, err
	}
	for key, v, _, i, ok := nextMember(c.in, start+1); ok; key, v, _, i, ok = nextMember(c.in, i) {
		if rawKeyIs(key, "tools") {
			c.pos = v
			d, err = p.converseSeedPart(c.in[v] == '[', kindTools)
			has = true
			break
		}
	}
	c.pos, c.out = end, c.out[:mark]
	return d, has, err
}

// converseMarkedArray canonicalizes a system or tools array in data mode,
// leaving its cachePoint elements out.
func (c *canon) converseMarkedArray() error {
	return c.filteredArray(func() (bool, error) {
		start := c.pos
		if err := c.value(); err != nil {
			return false, err // the element is not read whole: nothing to look into
		}
		return memberOf(c.in, start) != "cachePoint", nil
	})
}

// converseContent parses a Converse message's content array at c.pos.
func (p *Parser) converseContent() error {
	c := &p.c
	if empty, err := c.openArray(); err != nil || empty {
		return err
	}
	for {
		c.ws()
		start := c.pos
		hdr := c.reserveHeader()
		if err := c.value(); err != nil {
			return err
		}
		b := Block{Span: Span{start, c.pos}, Tokens: (c.pos - start + 3) / 4}
		var key Span
		b.Kind, key = p.converseBlock(start)
		if b.Kind == KindOther && c.in[start] == '{' {
			// only reads a valid object; a block that is not one (the
			// Converse parse refuses it later) has no members to count.
			k, _, _, n := only(c.in, start)
			b.Result = n == 1 && rawKeyIs(k, "toolResult")
		}
		switch b.Kind {
		case KindThinking, KindRedacted:
			b.Key, b.Signed = p.blockKey(key)
		case KindMarker:
		default:
			b.Digest = p.digest(hdr, kindBlock)
		}
		c.out = c.out[:hdr]
		p.blocks = append(p.blocks, b)
		if more, err := c.afterElement(); err != nil || !more {
			return err
		}
	}
}

// converseBlock classifies the valid content block at start: its kind and,
// for reasoning, the span of the signature (reasoningText) or of the
// redactedContent value (zero when absent). A block that is not an object
// of exactly one member is not a Converse block: the body is another API's.
func (p *Parser) converseBlock(start int) (BlockKind, Span) {
	in := p.c.in
	if in[start] != '{' {
		p.notMessages("a Converse content block that is not an object")
		return KindOther, Span{}
	}
	key, val, _, n := only(in, start)
	switch {
	case n == 0:
		p.notMessages("a Converse content block without a member")
		return KindOther, Span{}
	case n > 1:
		p.notMessages("a Converse content block with more than one member")
		return KindOther, Span{}
	case rawKeyIs(key, "cachePoint"):
		return KindMarker, Span{}
	case !rawKeyIs(key, "reasoningContent") || in[val] != '{':
		return KindOther, Span{}
	}
	rkey, rval, rend, n := only(in, val)
	switch {
	case n != 1:
	case rawKeyIs(rkey, "redactedContent"):
		return KindRedacted, Span{rval, rend}
	case rawKeyIs(rkey, "reasoningText") && in[rval] == '{':
		for k, v, e, i, ok := nextMember(in, rval+1); ok; k, v, e, i, ok = nextMember(in, i) {
			if rawKeyIs(k, "signature") {
				return KindThinking, Span{v, e}
			}
		}
		return KindThinking, Span{}
	}
	return KindOther, Span{}
}

// memberOf returns the decoded key of the object at start when it has
// exactly one member, else "". The text must be valid.
func memberOf(in []byte, start int) string {
	if start >= len(in) || in[start] != '{' {
		return ""
	}
	if key, _, _, n := only(in, start); n == 1 {
		return decodedKey(key)
	}
	return ""
}

// only returns the first member of the valid object at start (raw key,
// value span) and how many members it has, counting to 2 at most.
func only(in []byte, start int) (key []byte, v, e, n int) {
	key, v, e, i, ok := nextMember(in, start+1)
	if !ok {
		return nil, 0, 0, 0
	}
	if _, _, _, _, more := nextMember(in, i); more {
		return key, v, e, 2
	}
	return key, v, e, 1
}

// nextMember reads the member of a valid object that starts at or after i
// (just past the object's '{', or where the previous call said): its raw
// key (between the quotes), its value's span, and where to look for the
// next one; ok is false past the last member. It validates nothing: the
// canonicalizer read the text first.
func nextMember(in []byte, i int) (key []byte, v, e, next int, ok bool) {
	i = skipWS(in, i)
	if i < len(in) && in[i] == ',' {
		i = skipWS(in, i+1)
	}
	if i >= len(in) || in[i] != '"' {
		return nil, 0, 0, i, false
	}
	ke := stringEnd(in, i)
	key = in[i+1 : ke-1]
	v = skipWS(in, skipWS(in, ke)+1) // past ':'
	e = valueEnd(in, v)
	return key, v, e, e, true
}

func skipWS(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the valid string at in[i] == '"'.
func stringEnd(in []byte, i int) int {
	j := i + 1
	for {
		j = skipPlain(in, j)
		if j >= len(in) || in[j] == '"' {
			return j + 1
		}
		j += 2 // an escape: its second byte is never the closing quote
	}
}

// valueEnd returns the index just past the valid value at i.
func valueEnd(in []byte, i int) int {
	switch in[i] {
	case '{', '[':
		e, _ := objectEnd(in, i)
		return e
	case '"':
		return stringEnd(in, i)
	}
	for i < len(in) && in[i] != ',' && in[i] != '}' && in[i] != ']' && in[i] != ' ' && in[i] != '\t' && in[i] != '\n' && in[i] != '\r' {
		i++
	}
	return i
}

// rawKeyIs reports whether the raw key (between its quotes) decodes to want.
func rawKeyIs(key []byte, want string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == want // no allocation
	}
	return decodedKey(key) == want
}

// decodedKey decodes a raw key (between its quotes, valid).
func decodedKey(key []byte) string {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key)
	}
	quoted := make([]byte, 0, len(key)+2)
	quoted = append(append(append(quoted, '"'), key...), '"')
	return string(decodeString(nil, quoted))
}

// converseReplyContent reports whether a reply's content array is
// Converse's: at least one block, every block an object of one member, none
// of them named type.
func converseReplyContent(content json.RawMessage) bool {
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(content, &blocks) != nil || len(blocks) == 0 {
		return false
	}
	for _, b := range blocks {
		if _, typed := b["type"]; typed || len(b) != 1 {
			return false
		}
	}
	return true
}

// InputTransformationsOf reads the input_transformations a provider
// response carries, in any of the shapes a host may hold: a Messages
// response or its message_start event's message (top-level
// input_transformations), a message_delta event, a Converse response
// (additionalModelResponseFields.input_transformations, present when the
// request named "/input_transformations" in additionalModelResponseFieldPaths),
// a ConverseStream messageStop event, bare or wrapped in {"messageStop":
// ...}, or a ConverseStream response's event list (ConverseStreamReply). ok
// is false when the response carries none (absent is not empty: without the
// beta the provider reports nothing).
func InputTransformationsOf(response []byte) (trs []InputTransformation, ok bool, err error) {
	if t := bytes.TrimSpace(response); len(t) > 0 && t[0] == '[' {
		// A ConverseStream response's events: the messageStop one carries them.
		var evs []json.RawMessage
		if err := json.Unmarshal(t, &evs); err != nil {
			return nil, false, fmt.Errorf("input_transformations: %w", err)
		}
		for _, ev := range evs {
			if trs, ok, err = InputTransformationsOf(ev); err != nil || ok {
				return trs, ok, err
			}
		}
		return nil, false, nil
	}
	var v struct {
		trFields
		Message *trFields `json:"message"`
		AMRF    *trFields `json:"additionalModelResponseFields"`
		Stop    *struct {
			AMRF *trFields `json:"additionalModelResponseFields"`
		} `json:"messageStop"`
	}
	if err := json.Unmarshal(response, &v); err != nil {
		return nil, false, fmt.Errorf("input_transformations: %w", err)
	}
	found := []*trFields{&v.trFields, v.Message, v.AMRF}
	if v.Stop != nil {
		found = append(found, v.Stop.AMRF)
	}
	for _, f := range found {
		if f != nil && f.InputTransformations != nil {
			return *f.InputTransformations, true, nil
		}
	}
	return nil, false, nil
}

type trFields struct {
	InputTransformations *[]InputTransformation `json:"input_transformations"`
}

// A ConverseStream response, as a host holds it: its events in order, each
// the SDK's union object ({"messageStart": {...}}, {"contentBlockDelta":
// {...}}, ...). ConverseStreamReply assembles the reply the stream carried,
// as the Converse message a later request replays ({"role": "assistant",
// "content": [...]}), blocks in contentBlockIndex order:
//   - text deltas are concatenated into {text};
//   - reasoningContent deltas: text and signature into {reasoningContent:
//     {reasoningText: {text, signature}}}, redactedContent chunks (base64
//     each, as AWS JSON writes bytes) decoded, joined and written again as
//     one base64 text into {reasoningContent: {redactedContent}};
//   - a contentBlockStart's toolUse (toolUseId, name) and its input deltas
//     (JSON text in pieces) into {toolUse: {toolUseId, name, input}}, input
//     {} when none came.
//
// The messageStop event's additionalModelResponseFields are read by
// InputTransformationsOf, which takes the same event list.
func ConverseStreamReply(events []byte) ([]byte, error) {
	var evs []struct {
		Start *struct {
			Index int `json:"contentBlockIndex"`
			Start struct {
				ToolUse *struct {
					ID   string `json:"toolUseId"`
					Name string `json:"name"`
				} `json:"toolUse"`
			} `json:"start"`
		} `json:"contentBlockStart"`
		Delta *struct {
			Index int `json:"contentBlockIndex"`
			Delta struct {
				Text      *string `json:"text"`
				Reasoning *struct {
					Text      *string `json:"text"`
					Signature *string `json:"signature"`
					Redacted  []byte  `json:"redactedContent"`
				} `json:"reasoningContent"`
				ToolUse *struct {
					Input string `json:"input"`
				} `json:"toolUse"`
			} `json:"delta"`
		} `json:"contentBlockDelta"`
	}
	if err := json.Unmarshal(events, &evs); err != nil {
		return nil, fmt.Errorf("%w: ConverseStream events: %v", ErrBadReply, err)
	}
	type acc struct {
		kind             string // "text", "reasoning", "redacted", "toolUse"
		text, sig, input []byte
		redacted         []byte
		toolID, toolName string
		hasSignature     bool
	}
	blocks := map[int]*acc{}
	at := func(i int, kind string) (*acc, error) {
		if i < 0 || i > 1<<20 {
			return nil, fmt.Errorf("%w: contentBlockIndex %d", ErrBadReply, i)
		}
		b := blocks[i]
		if b == nil {
			b = &acc{kind: kind}
			blocks[i] = b
		}
		if b.kind == "reasoning" && kind == "redacted" {
			b.kind = kind
		} else if b.kind != kind && !(b.kind == "redacted" && kind == "reasoning") {
			return nil, fmt.Errorf("%w: block %d is both %s and %s", ErrBadReply, i, b.kind, kind)
		}
		return b, nil
	}
	for _, ev := range evs {
		switch {
		case ev.Start != nil && ev.Start.Start.ToolUse != nil:
			b, err := at(ev.Start.Index, "toolUse")
			if err != nil {
				return nil, err
			}
			b.toolID, b.toolName = ev.Start.Start.ToolUse.ID, ev.Start.Start.ToolUse.Name
		case ev.Delta != nil:
			d := ev.Delta.Delta
			var err error
			var b *acc
			switch {
			case d.Text != nil:
				if b, err = at(ev.Delta.Index, "text"); err == nil {
					b.text = append(b.text, *d.Text...)
				}
			case d.Reasoning != nil && d.Reasoning.Redacted != nil:
				if b, err = at(ev.Delta.Index, "redacted"); err == nil {
					b.redacted = append(b.redacted, d.Reasoning.Redacted...)
				}
			case d.Reasoning != nil:
				if b, err = at(ev.Delta.Index, "reasoning"); err == nil {
					if d.Reasoning.Text != nil {
						b.text = append(b.text, *d.Reasoning.Text...)
					}
					if d.Reasoning.Signature != nil {
						b.sig, b.hasSignature = append(b.sig, *d.Reasoning.Signature...), true
					}
				}
			case d.ToolUse != nil:
				if b, err = at(ev.Delta.Index, "toolUse"); err == nil {
					b.input = append(b.input, d.ToolUse.Input...)
				}
			}
			if err != nil {
				return nil, err
			}
		}
	}
	idx := make([]int, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	content := make([]any, 0, len(idx))
	for _, i := range idx {
		b := blocks[i]
		switch b.kind {
		case "text":
			content = append(content, map[string]any{"text": string(b.text)})
		case "redacted":
			content = append(content, map[string]any{"reasoningContent": map[string]any{"redactedContent": b.redacted}})
		case "reasoning":
			rt := map[string]any{"text": string(b.text)}
			if b.hasSignature {
				rt["signature"] = string(b.sig)
			}
			content = append(content, map[string]any{"reasoningContent": map[string]any{"reasoningText": rt}})
		case "toolUse":
			input := json.RawMessage(b.input)
			if len(bytes.TrimSpace(input)) == 0 {
				input = json.RawMessage(`{}`)
			} else if !json.Valid(input) {
				return nil, fmt.Errorf("%w: block %d: toolUse input is not JSON", ErrBadReply, i)
			}
			content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": b.toolID, "name": b.toolName, "input": input}})
		}
	}
	return json.Marshal(map[string]any{"role": "assistant", "content": content})
}
