package binding

import (
	"encoding/base64"
	"math/rand/v2"
	"strconv"
)

// genRequest builds a realistic, deterministic Anthropic Messages request
// body with nMsgs messages, keys in the order a JavaScript host writes them
// (not sorted), JSON.stringify-style escaping: system blocks, tools with
// input schemas (one deferred), cache_control markers, user text, assistant
// turns with signed thinking (long base64 signatures), text and tool_use,
// and user tool_result turns. About 2 KB per message: 500 messages come to
// about 1 MB.
func genRequest(seed uint64, nMsgs int) []byte {
	return genRequestPrefix(seed, nMsgs, nMsgs)
}

// genRequestPrefix is genRequest's first n messages of the conversation it
// would generate with total messages, so that genRequestPrefix(s, N, T) is a
// prefix (by messages) of genRequestPrefix(s, N+1, T).
func genRequestPrefix(seed uint64, n, total int) []byte {
	g := gen{rng: rand.New(rand.NewPCG(seed, 0x62696e64))}
	b := make([]byte, 0, 2200*n+16000)
	b = append(b, `{"model":"claude-opus-5-5","max_tokens":32000,"thinking":{"type":"adaptive"},"stream":true,`...)
	b = append(b, `"system":[{"type":"text","text":`...)
	b = g.str(b, g.text(3000))
	b = append(b, `},{"type":"text","text":`...)
	b = g.str(b, g.text(900))
	b = append(b, `,"cache_control":{"type":"ephemeral"}}],"tools":[`...)
	for i := range 12 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":"tool_`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","description":`...)
		b = g.str(b, g.text(300))
		b = append(b, `,"input_schema":{"type":"object","properties":{"path":{"type":"string","description":"File path"},"limit":{"type":"integer","minimum":1},"cache_control":{"type":"string","description":"data, not a marker"}},"required":["path"]}`...)
		if i == 10 {
			b = append(b, `,"defer_loading":true`...)
		}
		if i == 11 {
			b = append(b, `,"cache_control":{"type":"ephemeral"}`...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"messages":[`...)
	tool := 0
	g2 := gen{rng: rand.New(rand.NewPCG(seed, 0x6d736773))}
	for i := range total {
		if i == n {
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		last := i == total-1
		// Message i's bytes depend only on seed and i (its own rng), so
		// that a shorter request is a prefix of a longer one.
		g2.rng = rand.New(rand.NewPCG(seed, uint64(i)+1))
		switch {
		case i%8 == 0:
			b = append(b, `{"role":"user","content":`...)
			if i%16 == 0 {
				b = g2.str(b, g2.text(600))
			} else {
				b = append(b, `[{"type":"text","text":`...)
				b = g2.str(b, g2.text(600))
				if last {
					b = append(b, `,"cache_control":{"type":"ephemeral"}`...)
				}
				b = append(b, `}]`...)
			}
			b = append(b, '}')
		case i%2 == 1:
			b = append(b, `{"role":"assistant","content":[{"type":"thinking","thinking":`...)
			b = g2.str(b, g2.text(700))
			b = append(b, `,"signature":"`...)
			b = g2.sig(b, 400+g2.rng.IntN(900))
			b = append(b, `"}`...)
			if i%3 == 0 || i%8 == 7 {
				b = append(b, `,{"type":"text","text":`...)
				b = g2.str(b, g2.text(300))
				b = append(b, '}')
			}
			if i%8 == 7 {
				b = append(b, `]}`...)
				break
			}
			tool = i
			b = append(b, `,{"type":"tool_use","id":"toolu_`...)
			b = strconv.AppendInt(b, int64(tool), 10)
			b = append(b, `","name":"tool_3","input":{"path":"/src/main.go","limit":200,"cache_control":"kept as data"}}]}`...)
		default:
			b = append(b, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_`...)
			b = strconv.AppendInt(b, int64(tool), 10)
			b = append(b, `","content":`...)
			b = g2.str(b, g2.code(1600+g2.rng.IntN(1600)))
			if last {
				b = append(b, `,"cache_control":{"type":"ephemeral"}`...)
			}
			b = append(b, `}]}`...)
		}
	}
	b = append(b, `],"metadata":{"user_id":"u-123"},"cache_control":{"type":"ephemeral"}}`...)
	return b
}

type gen struct{ rng *rand.Rand }

var genWords = []string{"the", "binding", "prefix", "thinking", "block", "cache", "é", "中文", "😀", "<tag>", "a&b",
	"\"quoted\"", "path\\to\\file", "tab\there", "line\nbreak", "request", "signature", "tool", "result", "model",
	"\u2028", "value", "compile", "accept", "release", "stamp", "chain", "seed", "branch", "conversation"}

// text returns about n bytes of words.
func (g *gen) text(n int) string {
	b := make([]byte, 0, n+16)
	for len(b) < n {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, genWords[g.rng.IntN(len(genWords))]...)
	}
	return string(b)
}

// code returns about n bytes of tool output: lines of code-like text.
func (g *gen) code(n int) string {
	b := make([]byte, 0, n+64)
	for len(b) < n {
		b = append(b, "\tif err := f(\"x\"); err != nil { return fmt.Errorf(\"read %s: %w\", path, err) } // "...)
		b = append(b, genWords[g.rng.IntN(len(genWords))]...)
		b = append(b, '\n')
	}
	return string(b)
}

// sig appends n bytes of base64, like a thinking signature.
func (g *gen) sig(b []byte, n int) []byte {
	raw := make([]byte, n*3/4+3)
	for i := range raw {
		raw[i] = byte(g.rng.Uint32())
	}
	s := base64.StdEncoding.EncodeToString(raw)
	return append(b, s[:n/4*4]...)
}

// str appends s as a JSON string the way JSON.stringify writes it.
func (g *gen) str(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
