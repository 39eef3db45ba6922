package binding

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The model table: which models run the prefix check ("bind" thinking) and
// which models' thinking blocks each model can read. It is the only place
// bindery knows about models (research/preserved-thinking.md section 1.5 and
// section 3, as of Nov 2026). A file can override it (ParseModelTable).
//
// Matching rule (NormalizeModel): a model id is lower-cased; anything up to
// the last "/" goes (provider prefixes such as "anthropic/", Bedrock ARNs);
// a Bedrock "<region>.anthropic." or "anthropic." prefix goes; an "@..."
// (Vertex snapshot) or ":..." suffix goes; then a "-v<N>" suffix (Bedrock
// "-v1:0"), a "-latest" suffix and a dated snapshot "-YYYYMMDD" go; a dot
// between two digits becomes "-" ("claude-opus-4.5" is "claude-opus-4-5").
// The normalized id is then looked up exactly, else by the longest entry id
// ending in "*" that prefixes it, else it is unknown. An unknown model binds
// (a needless strip costs retention, a wrong keep costs a refused request)
// and reads only its own blocks.
//
// Route: a model id with a Bedrock marker ("anthropic." prefix, "-v<N>"
// suffix, an ARN) or a Vertex marker ("@") is not on the Claude API; rules
// the research restricts to the Claude API (Fable 5.1 reading Opus 5.5) hold
// only for a target id without those markers.

// ModelRule is one row of the model table, in the override file's shape.
type ModelRule struct {
	// ID is a normalized model id ("claude-fable-5-1"), or a prefix ending
	// in "*" ("claude-opus-4*").
	ID string `json:"id"`
	// Binds: the model runs the prefix check on the blocks it reads, and the
	// blocks it mints carry a record of their conversation.
	Binds bool `json:"binds"`
	// Group names a set of rows that Reads can name as "group:<name>".
	Group string `json:"group,omitempty"`
	// Reads lists whose blocks this model reads besides its own: normalized
	// ids, "prefix*" patterns, or "group:<name>".
	Reads []string `json:"reads,omitempty"`
	// ReadsOnClaudeAPI is like Reads but only when the target is on the
	// Claude API (see the route rule above).
	ReadsOnClaudeAPI []string `json:"readsOnClaudeAPI,omitempty"`
	// AccountBound: the blocks this model mints are read only in the
	// account that minted them (research 1.5 and 3: Sonnet 5.5, Haiku 5.5;
	// the provider drops them elsewhere as organization_binding_mismatch).
	AccountBound bool `json:"accountBound,omitempty"`
}

// ModelTable answers the model questions of the decision. The zero value is
// not usable; use DefaultModelTable or ParseModelTable.
type ModelTable struct {
	exact  map[string]*ModelRule
	prefix []*ModelRule // sorted by descending prefix length
	groups map[string][]string
}

type modelTableFile struct {
	// Replace: the file is the whole table; otherwise its rows are laid over
	// the default table (a row with the same id replaces the default row).
	Replace bool        `json:"replace"`
	Models  []ModelRule `json:"models"`
}

// defaultModelRules is preserved-thinking.md section 1.5, with the
// decisions the research leaves to us marked.
var defaultModelRules = []ModelRule{
	// Fable/Mythos 5.2: blocks read only by the 5.2 pair; what 5.2 reads is
	// not listed ("assume own pair; verify"): own pair only.
	{ID: "claude-fable-5-2", Binds: true, Reads: []string{"claude-mythos-5-2"}},
	{ID: "claude-mythos-5-2", Binds: true, Reads: []string{"claude-fable-5-2"}},
	// Fable/Mythos 5.1 read each other and all earlier models, and Opus 5.5
	// on the Claude API only. Mythos 5.1 binding is [CONFLICT]: binds.
	{ID: "claude-fable-5-1", Binds: true, Reads: []string{"claude-mythos-5-1", "group:legacy"}, ReadsOnClaudeAPI: []string{"claude-opus-5-5"}},
	{ID: "claude-mythos-5-1", Binds: true, Reads: []string{"claude-fable-5-1", "group:legacy"}, ReadsOnClaudeAPI: []string{"claude-opus-5-5"}},
	// Opus 5.5 reads Opus 5 and earlier Opus/Sonnet/Haiku, not Fable/Mythos.
	{ID: "claude-opus-5-5", Binds: true, Reads: []string{"claude-opus-5", "claude-sonnet-5", "claude-opus-4*", "claude-sonnet-4*", "claude-haiku-4*", "claude-3*", "claude-2*", "claude-instant*"}},
	// Sonnet 5.5: read set not detailed: own only. Haiku 5.5 drops other
	// models' blocks. (Bedrock says Haiku 5.5 blocks replay on other models;
	// no reader lists them, so no reader reads them here: [INF].) Both
	// mint blocks bound to the account (research 1.5, 3); Haiku 5.5's
	// "or a linked account" is not known to bindery: every credential is
	// its own account unless its fingerprint is the same (decide.go).
	{ID: "claude-sonnet-5-5", Binds: true, AccountBound: true},
	{ID: "claude-haiku-5-5", Binds: true, AccountBound: true},
	// Models without the prefix check. The model check still applies (an
	// Opus 5.5 block was dropped on Sonnet 5): they read only legacy blocks.
	{ID: "claude-fable-5", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-mythos-5", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-opus-5", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-sonnet-5", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-mythos-preview", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-opus-4*", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-sonnet-4*", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-haiku-4*", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-3*", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-2*", Group: "legacy", Reads: []string{"group:legacy"}},
	{ID: "claude-instant*", Group: "legacy", Reads: []string{"group:legacy"}},
}

var defaultTable = mustTable(defaultModelRules)

func mustTable(rules []ModelRule) *ModelTable {
	t, err := newModelTable(rules)
	if err != nil {
		panic(err)
	}
	return t
}

// DefaultModelTable returns the built-in table (preserved-thinking.md 1.5).
// It is shared and read-only.
func DefaultModelTable() *ModelTable { return defaultTable }

// ParseModelTable reads an override file:
//
//	{"replace": false, "models": [{"id": "claude-opus-6", "binds": true, "reads": ["claude-opus-5-5"]}]}
//
// Without "replace", rows are laid over the default table by id. Ids are
// normalized; an empty id, a "*" anywhere but at the end, a duplicate id or
// a "group:" read naming no group is an error.
func ParseModelTable(data []byte) (*ModelTable, error) {
	var f modelTableFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("model table: %w", err)
	}
	seen := map[string]bool{}
	for i := range f.Models {
		r := &f.Models[i]
		id := strings.TrimSuffix(r.ID, "*")
		if id == "" || strings.Contains(id, "*") {
			return nil, fmt.Errorf("model table: row %d: bad id %q", i, r.ID)
		}
		if !strings.HasSuffix(r.ID, "*") {
			r.ID = NormalizeModel(r.ID)
		} else {
			r.ID = strings.ToLower(r.ID)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("model table: duplicate id %q", r.ID)
		}
		seen[r.ID] = true
	}
	rules := f.Models
	if !f.Replace {
		rules = make([]ModelRule, 0, len(defaultModelRules)+len(f.Models))
		for _, d := range defaultModelRules {
			if !seen[d.ID] {
				rules = append(rules, d)
			}
		}
		rules = append(rules, f.Models...)
	}
	t, err := newModelTable(rules)
	if err != nil {
		return nil, fmt.Errorf("model table: %w", err)
	}
	return t, nil
}

func newModelTable(rules []ModelRule) (*ModelTable, error) {
	t := &ModelTable{exact: map[string]*ModelRule{}, groups: map[string][]string{}}
	for i := range rules {
		r := rules[i]
		r.Reads = append([]string(nil), r.Reads...)
		r.ReadsOnClaudeAPI = append([]string(nil), r.ReadsOnClaudeAPI...)
		if strings.HasSuffix(r.ID, "*") {
			t.prefix = append(t.prefix, &r)
		} else {
			t.exact[r.ID] = &r
		}
		if r.Group != "" {
			t.groups[r.Group] = append(t.groups[r.Group], r.ID)
		}
	}
	sort.SliceStable(t.prefix, func(i, j int) bool { return len(t.prefix[i].ID) > len(t.prefix[j].ID) })
	check := func(rs []*ModelRule) error {
		for _, r := range rs {
			for _, list := range [][]string{r.Reads, r.ReadsOnClaudeAPI} {
				for _, s := range list {
					if g, ok := strings.CutPrefix(s, "group:"); ok && len(t.groups[g]) == 0 {
						return fmt.Errorf("%s reads unknown group %q", r.ID, g)
					}
				}
			}
		}
		return nil
	}
	for _, r := range t.exact {
		if err := check([]*ModelRule{r}); err != nil {
			return nil, err
		}
	}
	if err := check(t.prefix); err != nil {
		return nil, err
	}
	return t, nil
}

// rule returns the row for a normalized id, or nil when the model is unknown.
func (t *ModelTable) rule(norm string) *ModelRule {
	if r, ok := t.exact[norm]; ok {
		return r
	}
	for _, r := range t.prefix {
		if strings.HasPrefix(norm, strings.TrimSuffix(r.ID, "*")) {
			return r
		}
	}
	return nil
}

// Known reports whether the table has a row for model.
func (t *ModelTable) Known(model string) bool { return t.rule(NormalizeModel(model)) != nil }

// Binds reports whether model runs the prefix check (and mints blocks that
// carry a record of their conversation). Unknown models bind.
func (t *ModelTable) Binds(model string) bool {
	r := t.rule(NormalizeModel(model))
	return r == nil || r.Binds
}

// AccountBound reports whether model's blocks are read only in the account
// that minted them. Unknown models are not: an unknown model is taken to
// read only its own blocks, and nothing says its blocks carry an account.
func (t *ModelTable) AccountBound(model string) bool {
	r := t.rule(NormalizeModel(model))
	return r != nil && r.AccountBound
}

// TargetBinds is a compile's resolved bindsThinking: the host's override
// when it gives one, else whether the model table says model binds (nil
// models: DefaultModelTable()).
func TargetBinds(models *ModelTable, model string, override *bool) bool {
	if override != nil {
		return *override
	}
	if models == nil {
		models = DefaultModelTable()
	}
	return models.Binds(model)
}

// Reads reports whether target can read thinking blocks minted by minter.
// A model always reads blocks minted by the same normalized model, on any
// route (signatures are portable across platforms).
func (t *ModelTable) Reads(target, minter string) bool {
	tn, mn := NormalizeModel(target), NormalizeModel(minter)
	if tn == mn {
		return true
	}
	r := t.rule(tn)
	if r == nil {
		return false
	}
	if t.matchAny(r.Reads, mn) {
		return true
	}
	return onClaudeAPI(target) && t.matchAny(r.ReadsOnClaudeAPI, mn)
}

func (t *ModelTable) matchAny(list []string, norm string) bool {
	for _, s := range list {
		if g, ok := strings.CutPrefix(s, "group:"); ok {
			for _, id := range t.groups[g] {
				if matchID(id, norm) {
					return true
				}
			}
			continue
		}
		if matchID(s, norm) {
			return true
		}
	}
	return false
}

func matchID(pattern, norm string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(norm, p)
	}
	return pattern == norm
}

// onClaudeAPI reports whether a model id names the Claude API route rather
// than Bedrock or Vertex (see the route rule in the package comment above).
func onClaudeAPI(model string) bool {
	m := strings.ToLower(strings.TrimSpace(model))
	if strings.Contains(m, "@") || strings.HasPrefix(m, "arn:") || strings.Contains(m, "anthropic.") {
		return false
	}
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if i := strings.IndexByte(m, ':'); i >= 0 {
		m = m[:i]
	}
	return !hasVersionSuffix(m)
}

func hasVersionSuffix(m string) bool {
	i := strings.LastIndex(m, "-v")
	if i < 0 || i+2 == len(m) {
		return false
	}
	return allDigits(m[i+2:])
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// NormalizeModel maps a model id as hosts spell it to the table's form
// (the matching rule is in the comment at the top of this file).
func NormalizeModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if i := strings.Index(m, "anthropic."); i >= 0 {
		m = m[i+len("anthropic."):]
	}
	if i := strings.IndexByte(m, '@'); i >= 0 {
		m = m[:i]
	}
	if i := strings.IndexByte(m, ':'); i >= 0 {
		m = m[:i]
	}
	if hasVersionSuffix(m) {
		m = m[:strings.LastIndex(m, "-v")]
	}
	m = strings.TrimSuffix(m, "-latest")
	if i := strings.LastIndexByte(m, '-'); i >= 0 && len(m)-i-1 == 8 && allDigits(m[i+1:]) {
		m = m[:i]
	}
	if strings.IndexByte(m, '.') >= 0 {
		b := []byte(m)
		for i := 1; i+1 < len(b); i++ {
			if b[i] == '.' && isDigit(b[i-1]) && isDigit(b[i+1]) {
				b[i] = '-'
			}
		}
		m = string(b)
	}
	return m
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
