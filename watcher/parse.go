package watcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/my-pi/bindery/api/jsonscan"
)

// Parser turns the complete lines of one session file, in file order, into a
// Header and Entries. It holds only the few facts a line needs about the
// lines before it (ParseState), so a file can be parsed in pieces, across
// restarts, without keeping any line.
type Parser struct {
	Path  string
	State ParseState

	// intern shares the few distinct values of fields like type, role and
	// model between entries instead of allocating each again.
	intern map[string]string
	// blocks is the scratch list of an assistant message's content spans
	// (reply.go), reused from entry to entry.
	blocks []replyBlock
	// replies: an assistant message with signed thinking gets its Reply
	// (ReadReply's parser only).
	replies bool
}

const maxInterned = 512

// readInterned is readString for fields with few distinct values.
func (p *Parser) readInterned(b []byte, i int) (string, int) {
	raw, ok, end := rawString(b, i)
	if !ok || len(raw) > 64 || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return readString(b, i)
	}
	if s, ok := p.intern[string(raw)]; ok {
		return s, end
	}
	s := string(raw)
	if p.intern == nil {
		p.intern = make(map[string]string)
	}
	if len(p.intern) < maxInterned {
		p.intern[s] = s
	}
	return s, end
}

// ParseState is what parsing the next line needs to know about the lines
// before it. The watcher keeps it in Cursor.Check so a restart resumes with it.
type ParseState struct {
	Lines int // complete lines seen (blank and malformed ones included)
	// Values counts lines that were valid JSON: pi's in-memory entry index
	// (the header is value 0). v1 ids and firstKeptEntryIndex use it.
	Values int
	// Version is the header's version (1 when missing); 0 until a header is
	// seen. NotSession is set when the first value was not a session header:
	// pi treats such a file as empty, and so does bindery (see Parser.Line).
	Version    int
	NotSession bool
}

// Parsed is the outcome of one line: at most one of Header and Entry, and
// possibly an error (a skipped line, or a kept line with an odd field).
type Parsed struct {
	Header *Header
	Entry  *Entry
	Err    *IngestError
}

// V1ID is the id bindery gives the entry at index value (pi's index: the
// header is 0) of a v1 file, which has no ids of its own.
//
// v1 files carry neither id nor parentId: the only link between entries is
// file order. pi's v1->v2 migration numbers the JSON values it parsed from the
// file (malformed lines skipped, the header at index 0), chains every entry to
// the previous value, and resolves compaction.firstKeptEntryIndex against the
// same numbering. bindery synthesizes ids from that index, so an id is stable
// across re-reads and restarts, needs no table to resolve firstKeptEntryIndex,
// and can never collide with pi's ids (8 hex digits or a UUID, no colon).
// In a file without malformed or blank lines the index is the 0-based line
// number (line 2 is "v1:1"). When pi migrates the file it assigns random ids
// and rewrites it, which bindery sees as a rewrite and ingests afresh.
func V1ID(value int) string { return "v1:" + strconv.Itoa(value) }

// NewParser returns a Parser at the start of the file at path.
func NewParser(path string) *Parser { return &Parser{Path: path} }

// Line parses one complete line (without or with its trailing newline) that
// starts at offset in the file.
//
// Rules:
//   - Blank lines are skipped silently, as pi does.
//   - A line that is not valid JSON is skipped with an IngestError.
//   - The first value must be a session header (type "session" with a string
//     id). If it is not, the file is not a session as far as pi is concerned
//     (pi would truncate and re-initialise it on open): Line reports one
//     IngestError and ignores every later line. The watcher keeps following
//     the file, so if pi re-initialises it the rewrite is noticed and the new
//     content ingested.
//   - Every later value becomes an Entry; unknown types are kept, their Type
//     verbatim.
func (p *Parser) Line(line []byte, offset int64) Parsed {
	e := &Entry{}
	res, kept := p.lineInto(line, offset, e)
	if kept {
		res.Entry = e
	}
	return res
}

// lineInto is Line parsing the entry, if the line holds one, into *e (which
// must be zero) instead of a new Entry: the reader parses a batch's lines
// straight into the batch's slice. kept reports whether *e is an entry;
// res.Entry is left nil.
func (p *Parser) lineInto(line []byte, offset int64, e *Entry) (res Parsed, kept bool) {
	p.State.Lines++
	lineNo := p.State.Lines
	length := len(line)
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return Parsed{}, false
	}
	if p.State.NotSession {
		return Parsed{}, false
	}
	if !jsonscan.Valid(line) {
		return Parsed{Err: &IngestError{Path: p.Path, Line: lineNo, Offset: offset, Reason: "malformed JSON"}}, false
	}
	value := p.State.Values
	p.State.Values++
	i := jsonscan.SkipSpace(line, 0)
	if line[i] != '{' {
		if p.State.Version == 0 {
			p.State.NotSession = true
			return Parsed{Err: &IngestError{Path: p.Path, Line: lineNo, Offset: offset, Reason: "first line is not a session header (not an object); file ignored until rewritten"}}, false
		}
		return Parsed{Err: &IngestError{Path: p.Path, Line: lineNo, Offset: offset, Reason: "line is not a JSON object"}}, false
	}
	if p.State.Version == 0 {
		h, ok := parseHeader(line)
		if !ok {
			p.State.NotSession = true
			return Parsed{Err: &IngestError{Path: p.Path, Line: lineNo, Offset: offset, Reason: "first line is not a session header; file ignored until rewritten"}}, false
		}
		p.State.Version = h.Version
		return Parsed{Header: h}, false
	}
	e.Line, e.Offset, e.Length = lineNo, offset, length
	var odd string
	p.parseEntry(line, e, &odd)
	if e.Type == "session" {
		return Parsed{Err: &IngestError{Path: p.Path, Line: lineNo, Offset: offset, Reason: "second session header skipped"}}, false
	}
	if p.State.Version < 2 {
		e.ID = V1ID(value)
		if value > 1 {
			e.ParentID = V1ID(value - 1)
		}
	}
	var err *IngestError
	if odd != "" {
		err = &IngestError{Path: p.Path, Line: lineNo, Offset: offset, Reason: odd, Kept: true}
	}
	return Parsed{Err: err}, true
}

func parseHeader(b []byte) (*Header, bool) {
	h := &Header{}
	var isSession, hasID bool
	for i := 0; ; {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			var t string
			t, i = readString(b, v)
			isSession = t == "session"
		case "id":
			_, hasID, _ = rawString(b, v)
			h.ID, i = readString(b, v)
		case "version":
			_, isInt, n, ok, end := readNumber(b, v)
			if ok && isInt {
				h.Version = int(n)
			}
			i = end
		case "cwd":
			h.Cwd, i = readString(b, v)
		case "timestamp":
			h.Timestamp, i = readString(b, v)
		case "parentSession":
			h.ParentSession, i = readString(b, v)
		case "branchedFrom":
			if h.ParentSession == "" {
				h.ParentSession, i = readString(b, v)
			} else {
				i = skipValue(b, v)
			}
		case "provider":
			h.Provider, i = readString(b, v)
		case "modelId":
			h.ModelID, i = readString(b, v)
		case "thinkingLevel":
			h.ThinkingLevel, i = readString(b, v)
		default:
			i = skipValue(b, v)
		}
	}
	if !isSession || !hasID {
		return nil, false
	}
	if h.Version <= 0 {
		h.Version = 1
	}
	return h, true
}

func (p *Parser) parseEntry(b []byte, e *Entry, odd *string) {
	var (
		hasMsg          bool
		firstKeptIndex  = -1
		dataStart       = -1
		dataEnd         int
		contentStart    = -1
		summaryNonBlank bool
		usageStart      = -1
		replStart       = -1
		model, kind     string
	)
	for i := 0; ; {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			e.Type, i = p.readInterned(b, v)
		case "id":
			e.ID, i = readString(b, v)
		case "parentId":
			e.ParentID, i = readString(b, v)
		case "timestamp":
			e.Timestamp, i = readString(b, v)
		case "message":
			if b[v] == '{' {
				hasMsg = true
				i = p.parseMessage(b, v, e)
			} else {
				i = skipValue(b, v)
			}
		case "provider":
			e.Provider, i = p.readInterned(b, v)
		case "modelId":
			e.ModelID, i = p.readInterned(b, v)
		case "thinkingLevel":
			e.ThinkingLevel, i = p.readInterned(b, v)
		case "firstKeptEntryId":
			e.FirstKeptEntryID, i = readString(b, v)
		case "firstKeptEntryIndex":
			_, isInt, n, ok, end := readNumber(b, v)
			if ok && isInt && n >= 0 {
				firstKeptIndex = int(n)
			}
			i = end
		case "customType":
			e.CustomType, i = p.readInterned(b, v)
		case "data":
			dataStart, i = v, skipValue(b, v)
			dataEnd = i
		case "content":
			contentStart, i = v, skipValue(b, v)
		case "fromId":
			e.FromID, i = readString(b, v)
		case "summary":
			raw, ok, end := rawString(b, v)
			summaryNonBlank = ok && !blank(raw)
			i = end
		case "targetId":
			e.TargetID, i = readString(b, v)
		case "label":
			e.Label, i = readString(b, v)
		case "name":
			e.Name, i = readString(b, v)
		case "kind":
			kind, i = p.readInterned(b, v)
		case "model":
			model, i = p.readInterned(b, v)
		case "usage":
			usageStart, i = v, skipValue(b, v)
		case "replacement":
			replStart, i = v, skipValue(b, v)
		default:
			i = skipValue(b, v)
		}
	}
	switch e.Type {
	case "usage":
		// pi writes the entry's own provider, model and usage (the
		// message's shape without the message).
		e.Model, e.UsageKind = model, kind
		if usageStart >= 0 && b[usageStart] == '{' {
			e.Usage, _ = parseUsage(b, usageStart)
		} else {
			*odd = "usage entry without a usage object"
		}
	case "context_edit":
		p.parseReplacement(b, replStart, e, odd)
	case "message":
		if !hasMsg {
			*odd = "message entry without a message object"
		}
	case "compaction":
		if e.FirstKeptEntryID == "" && firstKeptIndex >= 0 && p.State.Version < 2 {
			// pi resolves the index into its entry list; index 0 is the header.
			if firstKeptIndex >= 1 && firstKeptIndex < p.State.Values {
				e.FirstKeptEntryID = V1ID(firstKeptIndex)
			} else {
				*odd = "firstKeptEntryIndex " + strconv.Itoa(firstKeptIndex) + " names no earlier entry"
			}
		}
	case "custom":
		if e.CustomType == FrontierCustomType && dataStart >= 0 {
			e.Data = json.RawMessage(bytes.Clone(b[dataStart:dataEnd]))
		}
	case "custom_message":
		e.UserText = contentStart >= 0 && contentSent(b, contentStart)
	case "branch_summary":
		e.UserText = summaryNonBlank
	}
}

// parseReplacement reads a context_edit's replacement at b[start]: null
// omits the target; {content: string | array} replaces its content, whose
// thinking blocks (pi's format) are what the model sees of the target's
// thinking from the edit on.
func (p *Parser) parseReplacement(b []byte, start int, e *Entry, odd *string) {
	if start < 0 {
		*odd = "context_edit without a replacement"
		return
	}
	switch b[start] {
	case 'n':
		e.EditOmit = true
		return
	case '{':
	default:
		*odd = "context_edit replacement is neither null nor an object"
		return
	}
	for i := start; ; {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			break
		}
		if string(key) == "content" && b[v] == '[' {
			i = parseAssistantContent(b, v, e, nil)
			e.ToolCalls = 0 // the target's tool calls are the target's
		} else {
			i = skipValue(b, v)
		}
	}
}

// FrontierCustomType is pi-condense's frontier snapshot, the only custom
// entry whose data bindery keeps.
const FrontierCustomType = "context-prune-frontier"

// parseMessage reads the message object at b[start] into e and returns its
// end. pi writes role before content, so content is usually read in the same
// pass; otherwise it is read once role is known.
func (p *Parser) parseMessage(b []byte, start int, e *Entry) int {
	blocks := p.blocks[:0]
	defer func() { p.blocks = blocks[:0] }()
	contentStart := -1
	contentDone := false
	exclude := false
	i := start
	for {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			break
		}
		switch string(key) {
		case "role":
			e.Role, i = p.readInterned(b, v)
		case "content":
			contentStart, contentDone = v, false
			if e.Role == "assistant" && b[v] == '[' {
				e.Thinking, e.ToolCalls = e.Thinking[:0], 0
				i = parseAssistantContent(b, v, e, &blocks)
				contentDone = true
			} else {
				i = skipValue(b, v)
			}
		case "model":
			e.Model, i = p.readInterned(b, v)
		case "provider":
			e.Provider, i = p.readInterned(b, v)
		case "api":
			e.API, i = p.readInterned(b, v)
		case "stopReason":
			e.StopReason, i = p.readInterned(b, v)
		case "usage":
			if b[v] == '{' {
				e.Usage, i = parseUsage(b, v)
			} else {
				i = skipValue(b, v)
			}
		case "toolCallId":
			e.ToolCallID, i = readString(b, v)
		case "timestamp":
			_, _, n, ok, end := readNumber(b, v)
			if ok {
				e.MessageTimestamp = n
			}
			i = end
		case "excludeFromContext":
			exclude = isTrue(b, v)
			i = skipValue(b, v)
		default:
			i = skipValue(b, v)
		}
	}
	if e.Role == "hookMessage" {
		e.Role = "custom" // pi's v2->v3 migration renames it
	}
	switch e.Role {
	case "assistant":
		if contentStart >= 0 && !contentDone && b[contentStart] == '[' {
			blocks = blocks[:0]
			parseAssistantContent(b, contentStart, e, &blocks)
		}
		if p.replies {
			e.Reply = signedReply(e, blocks)
		}
	case "user", "custom":
		e.UserText = contentStart >= 0 && contentSent(b, contentStart)
	case "bashExecution":
		// Sent as a user text message unless excluded (!! commands).
		e.UserText = !exclude
	}
	return i
}

// contentSent reports whether user-side content (a string or an array of
// text and image blocks) leaves anything after pi drops blank text: a
// message left empty is not sent at all.
func contentSent(b []byte, i int) bool {
	switch b[i] {
	case '"':
		raw, _, _ := rawString(b, i)
		return !blank(raw)
	case '[':
		for j := i; ; {
			v, ok := jsonscan.NextElement(b, &j)
			if !ok {
				return false
			}
			typ, text, hasText := "", false, false
			if b[v] == '{' {
				k := v
				for {
					key, kv, ok := jsonscan.NextMember(b, &k)
					if !ok {
						break
					}
					switch string(key) {
					case "type":
						raw, _, end := rawString(b, kv)
						typ = string(raw)
						k = end
					case "text":
						raw, ok, end := rawString(b, kv)
						hasText, text = ok, ok && !blank(raw)
						k = end
					default:
						k = skipValue(b, kv)
					}
				}
				j = k
			} else {
				j = skipValue(b, v)
			}
			if typ == "image" || (typ == "text" && hasText && text) {
				return true
			}
		}
	}
	return false
}

// parseAssistantContent reads an assistant content array into e's thinking
// blocks and tool calls. With blocks non-nil it also collects each block's
// spans, so that a reply holding signed thinking can be given in the
// provider's wire shape (reply.go) without reading the line again.
func parseAssistantContent(b []byte, start int, e *Entry, blocks *[]replyBlock) int {
	index := 0
	for j := start; ; index++ {
		v, ok := jsonscan.NextElement(b, &j)
		if !ok {
			return j
		}
		if b[v] != '{' {
			j = skipValue(b, v)
			if blocks != nil {
				*blocks = append(*blocks, replyBlock{whole: b[v:j]})
			}
			continue
		}
		var (
			typ      []byte
			chars    int
			redacted bool
			sig      []byte
			hasSig   bool
			rb       replyBlock
		)
		k := v
		for {
			key, kv, ok := jsonscan.NextMember(b, &k)
			if !ok {
				break
			}
			switch string(key) {
			case "type":
				typ, _, k = rawString(b, kv)
			case "thinking":
				raw, ok, end := rawString(b, kv)
				if ok {
					chars = jsonscan.RuneCount(raw)
				}
				rb.thinking = raw
				k = end
			case "thinkingSignature":
				sig, hasSig, k = rawString(b, kv)
			case "redacted":
				redacted = isTrue(b, kv)
				k = skipValue(b, kv)
			case "text":
				rb.text, _, k = rawString(b, kv)
			case "id":
				k = skipValue(b, kv)
				rb.id = b[kv:k]
			case "name":
				k = skipValue(b, kv)
				rb.name = b[kv:k]
			case "arguments":
				k = skipValue(b, kv)
				rb.args = b[kv:k]
			default:
				k = skipValue(b, kv)
			}
		}
		j = k
		if blocks != nil {
			rb.whole, rb.typ, rb.sig, rb.redacted = b[v:j], typ, sig, redacted
			*blocks = append(*blocks, rb)
		}
		switch string(typ) {
		case "thinking":
			tb := ThinkingBlock{Index: index, Redacted: redacted, Chars: chars}
			if hasSig && len(sig) > 0 {
				tb.Signed = true
				// The digest is of the decoded signature: its bytes as written when it has no escape.
				var sum [32]byte
				if bytes.IndexByte(sig, '\\') >= 0 {
					sum = sha256.Sum256([]byte(decodeString(sig)))
				} else {
					sum = sha256.Sum256(sig)
				}
				tb.SigDigest = sum[:]
			}
			e.Thinking = append(e.Thinking, tb)
		case "toolCall":
			e.ToolCalls++
		}
	}
}

func parseUsage(b []byte, start int) (*Usage, int) {
	u := &Usage{}
	i := start
	for {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			return u, i
		}
		switch string(key) {
		case "input":
			u.Input, i = optInt(b, v)
		case "output":
			u.Output, i = optInt(b, v)
		case "cacheRead":
			u.CacheRead, i = optInt(b, v)
		case "cacheWrite":
			u.CacheWrite, i = optInt(b, v)
		case "totalTokens":
			u.TotalTokens, i = optInt(b, v)
		case "cacheWrite1h":
			u.CacheWrite1h, i = optInt(b, v)
		case "reasoning":
			u.Reasoning, i = optInt(b, v)
		case "cost":
			if b[v] == '{' {
				u.Cost, i = parseCost(b, v)
			} else {
				i = skipValue(b, v)
			}
		default:
			i = skipValue(b, v)
		}
	}
}

func parseCost(b []byte, start int) (*Cost, int) {
	c := &Cost{}
	i := start
	for {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			return c, i
		}
		switch string(key) {
		case "input":
			c.Input, i = optFloat(b, v)
		case "output":
			c.Output, i = optFloat(b, v)
		case "cacheRead":
			c.CacheRead, i = optFloat(b, v)
		case "cacheWrite":
			c.CacheWrite, i = optFloat(b, v)
		case "total":
			c.Total, i = optFloat(b, v)
		default:
			i = skipValue(b, v)
		}
	}
}

func optInt(b []byte, i int) (*int64, int) {
	_, _, n, ok, end := readNumber(b, i)
	if !ok {
		return nil, end
	}
	return &n, end
}

func optFloat(b []byte, i int) (*float64, int) {
	f, _, _, ok, end := readNumber(b, i)
	if !ok {
		return nil, end
	}
	return &f, end
}
