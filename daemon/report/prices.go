package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/my-pi/bindery/api"
)

// Cache pricing multipliers over base input, from the prompt-caching docs
// (research/preserved-thinking.md section 5): a 5-minute write is 1.25x, a
// 1-hour write 2x, a read 0.1x except where readMultiplier says otherwise.
const (
	writeMultiplier5m = 1.25
	writeMultiplier1h = api.Write1hMultiplier
)

// readMultiplier is the cache-read price over base input (same section):
// Opus 5.5 0.05x; Fable 5.1, Mythos 5.1 and Fable 5.2 0.025x (the last from
// a third-party blog); every other Claude model the documented 0.1x.
// Mythos 5.2 is not listed anywhere we read, so it has none.
func readMultiplier(key string) (float64, bool) {
	switch key {
	case "opus-5.5":
		return 0.05, true
	case "fable-5.1", "mythos-5.1", "fable-5.2":
		return 0.025, true
	case "mythos-5.2":
		return 0, false
	}
	if isClaudeKey(key) {
		return 0.1, true
	}
	return 0, false
}

// isClaudeKey reports whether key is a ModelKey of a Claude model.
func isClaudeKey(key string) bool {
	_, _, _, ok := parseClaude(claudeID(key))
	return ok
}

// claudeID turns a ModelKey ("opus-5.5") back into a parseable id.
func claudeID(key string) string { return "claude-" + strings.ReplaceAll(key, ".", "-") }

func usd(v float64) *float64 { return &v }

// builtinPrices is the only place bindery states a price. Every row cites
// its source; a model without a cited base price is absent (its requests
// are priced from pi's usage.cost when present, else reported as tokens).
var builtinPrices = map[string]Price{
	// Seed 001 (pi-condense doc/specs/2026-08-05-remove-thinking-strip.md,
	// "Measurement caveats"): "$3/Mtok input, $15/Mtok output, $3.75/Mtok
	// cache write (5m), $0.30/Mtok cache read" - the 1.25x and 0.1x of
	// preserved-thinking.md section 5.
	"sonnet-4.5": {
		Input: usd(3), Output: usd(15), CacheWrite: usd(3.75), CacheRead: usd(0.30),
		Source: "seed 001 (pi-condense remove-thinking-strip spec); multipliers: Anthropic prompt-caching docs",
	},
	// preserved-thinking.md section 5 citing
	// https://www.developersdigest.tech/blog/claude-fable-5-2-whats-new-migration-2026:
	// "$0.20/MTok read against $8 input". The write is the documented 1.25x
	// of input. No output price is given, so none is stated.
	"fable-5.2": {
		Input: usd(8), CacheWrite: usd(8 * writeMultiplier5m), CacheRead: usd(0.20),
		Source: "developersdigest.tech blog on Fable 5.2 (third-party); write: Anthropic prompt-caching docs 1.25x",
	},
}

// Prices is the model price table: the cited built-in rows, overridden
// row by row by an optional JSON file.
type Prices struct {
	models      map[string]Price
	fingerprint string
	// used, on a tracked copy (tracked), records that a lookup was made:
	// an aggregate priced without one holds under any table.
	used *bool
}

// tracked is a copy of p that records whether it was consulted.
func (p *Prices) tracked() (*Prices, *bool) {
	used := new(bool)
	if p == nil {
		return &Prices{used: used}, used
	}
	c := *p
	c.used = used
	return &c, used
}

// DefaultPrices is the built-in table alone.
func DefaultPrices() *Prices {
	p, _ := ParsePrices(nil)
	return p
}

// ParsePrices returns the built-in table overridden by data, a JSON object
// mapping a model id (any spelling ModelKey understands, e.g.
// "claude-opus-5-5" or "opus-5.5") to a Price in USD per million tokens:
//
//	{"claude-opus-5-5": {"input": 15, "output": 75, "cacheWrite": 18.75,
//	  "cacheRead": 0.75, "source": "my invoice, 2026-11"}}
//
// A row in the file replaces the built-in row for that model entirely.
// Empty data means no overrides.
func ParsePrices(data []byte) (*Prices, error) {
	models := make(map[string]Price, len(builtinPrices))
	for k, v := range builtinPrices {
		models[k] = v
	}
	if len(bytes.TrimSpace(data)) > 0 {
		var over map[string]Price
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&over); err != nil {
			return nil, fmt.Errorf("price table: %w", err)
		}
		for id, p := range over {
			for _, f := range []*float64{p.Input, p.Output, p.CacheWrite, p.CacheWrite1h, p.CacheRead} {
				if f != nil && *f < 0 {
					return nil, fmt.Errorf("price table: %s: negative price", id)
				}
			}
			models[priceKey(id)] = p
		}
	}
	keys := make([]string, 0, len(models))
	for k := range models {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		b, _ := json.Marshal(models[k])
		fmt.Fprintf(h, "%s=%s\n", k, b)
	}
	return &Prices{models: models, fingerprint: hex.EncodeToString(h.Sum(nil))[:16]}, nil
}

// priceKey accepts both a model id and an already reduced key.
func priceKey(id string) string {
	if _, _, _, ok := parseClaude(id); ok {
		return ModelKey(id)
	}
	if isClaudeKey(id) {
		return ModelKey(claudeID(id))
	}
	return ModelKey(id)
}

// Lookup returns the table's row for a model.
func (p *Prices) Lookup(model string) (Price, bool) {
	if p == nil {
		return Price{}, false
	}
	if p.used != nil {
		*p.used = true
	}
	pr, ok := p.models[ModelKey(model)]
	return pr, ok
}

// Fingerprint identifies the table's contents: a cached summary priced with
// another table is stale.
func (p *Prices) Fingerprint() string {
	if p == nil {
		return ""
	}
	return p.fingerprint
}

// Rows lists the table, sorted by model key, for documentation and --json.
func (p *Prices) Rows() map[string]Price {
	if p == nil {
		return map[string]Price{}
	}
	out := make(map[string]Price, len(p.models))
	for k, v := range p.models {
		out[k] = v
	}
	return out
}
