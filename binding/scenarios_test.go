package binding

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// Section 8 scenarios that run through the parser's canonical form: JSON
// bodies whose bytes change in ways the provider does or does not count.

const toolsJSON = `[{"name":"read","description":"Read a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]`

func bodyT(model, system, tools, extra string, msgs []string) []byte {
	return []byte(`{"model":` + q(model) + `,"max_tokens":1024,"system":` + q(system) + `,"tools":` + tools + extra +
		`,"thinking":{"type":"adaptive"},"messages":[` + strings.Join(msgs, ",") + `]}`)
}

// engagedWith runs two rounds with tools and returns the history ending with u3.
func engagedWith(s *sim, tools string) []string {
	h := []string{u("u1")}
	r1 := a(th("S1"), tu("t1"))
	c, sent := s.compile(bodyT(opus55, "sys", tools, "", h))
	s.mint(sent, r1)
	s.accept(c.ID, r1)
	h = append(h, r1, tr("t1", "file"))
	r2 := a(th("S2"), tx("done"))
	c, sent = s.compile(bodyT(opus55, "sys", tools, "", h))
	s.mint(sent, r2)
	s.accept(c.ID, r2)
	return append(h, r2, u("u3"))
}

func TestScenarioDeferredTool(t *testing.T) { // 4, 3
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	deferred := strings.TrimSuffix(toolsJSON, "]") + `,{"name":"web","description":"d","input_schema":{"type":"object"},"defer_loading":true}]`
	c, _ := s.compile(bodyT(opus55, "sys", deferred, "", h))
	expectStrips(t, c)
	added := strings.TrimSuffix(toolsJSON, "]") + `,{"name":"web","description":"d","input_schema":{"type":"object"}}]`
	c, _ = s.compile(bodyT(opus55, "sys", added, "", h))
	expectStrips(t, c, "messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed")
	edited := strings.Replace(toolsJSON, "Read a file.", "Read a file. Be careful.", 1)
	c, _ = s.compile(bodyT(opus55, "sys", edited, "", h))
	expectStrips(t, c, "messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed")
}

func TestScenarioOutsideThePrefix(t *testing.T) { // 12, 14, 15
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	// cache_control markers added on a block, a tool and at the top level;
	// effort, max_tokens, tool_choice, metadata, thinking.display changed;
	// keys reordered and whitespace between tokens added.
	marked := slices.Clone(h)
	marked[2] = `{"content":[{"content":"file","tool_use_id":"t1","type":"tool_result","cache_control":{"type":"ephemeral"}}],  "role":"user"}`
	tools := strings.Replace(toolsJSON, `"name":"read",`, `"cache_control":{"type":"ephemeral"},"name":"read",`, 1)
	extra := `,"output_config":{"effort":"low"},"tool_choice":{"type":"any"},"metadata":{"user_id":"x"},"cache_control":{"type":"ephemeral"}`
	b := bodyT(opus55, "sys", tools, extra, marked)
	b = bytes.Replace(b, []byte(`"max_tokens":1024`), []byte(`"max_tokens" : 9999`), 1)
	c, _ := s.compile(b)
	expectStrips(t, c)
	if c.Cache.Cause != CauseNone {
		t.Fatalf("cache %+v", c.Cache)
	}
	// A whitespace change inside a string is a value change (INF; conservative).
	spaced := slices.Clone(h)
	spaced[2] = tr("t1", "file ")
	c, _ = s.compile(bodyT(opus55, "sys", toolsJSON, "", spaced))
	expectStrips(t, c, "messages.3.content.0 prefix-changed")
	if c.Cache.Path != "messages.2.content.0" || c.Cache.Cause != CauseHost {
		t.Fatalf("cache %+v", c.Cache)
	}
}

func TestScenarioAppendedSystemMessageAndForeignTurn(t *testing.T) { // 39, 45, 40
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	h = append(h, `{"role":"system","content":"tool_addition: web","clear_at":"next_user_message"}`)
	c, _ := s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	expectStrips(t, c)
	r := a(th("S3"), tx("ok"))
	s.mint(s.lastSent[c.ID], r)
	s.accept(c.ID, r)
	// A turn from a non-Claude model appended as plain text.
	h = append(h, r, u("u4"), a(tx("from another model")), u("u5"))
	c, _ = s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	expectStrips(t, c)
	// The turn-scoped message deleted later: the blocks after it are invalid.
	h2 := append(slices.Clone(h[:5]), h[6:]...)
	c, _ = s.compile(bodyT(opus55, "sys", toolsJSON, "", h2))
	expectStrips(t, c, "messages.5.content.0 prefix-changed")
}

func TestScenarioReminderAddedThenRemoved(t *testing.T) { // 41
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	withReminder := slices.Clone(h)
	withReminder[len(h)-1] = `{"role":"user","content":[{"type":"text","text":"u3"},{"type":"text","text":"<reminder>"}]}`
	r := a(th("S3"), tx("ok"))
	c, sent := s.compile(bodyT(opus55, "sys", toolsJSON, "", withReminder))
	expectStrips(t, c)
	s.mint(sent, r)
	s.accept(c.ID, r)
	h = append(h, r, u("u4")) // the host removed the reminder
	c, _ = s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	expectStrips(t, c, "messages.5.content.0 prefix-changed")
	if c.Cache.Path != "messages.4.content.1" || c.Cache.Cause != CauseHost {
		t.Fatalf("cache %+v", c.Cache)
	}
}

func TestScenarioKeepTailCompaction(t *testing.T) { // 34, 35
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	r3 := a(th("S3"), tx("a3"))
	c, sent := s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	s.mint(sent, r3)
	s.accept(c.ID, r3)
	h = append(h, r3, u("u4"))
	// The host's own summary replaces the first two turns; the tail keeps S2, S3.
	tail := append([]string{u("summary")}, h[3:]...)
	r4 := a(th("S4"), tx("a4"))
	c, sent = s.compile(bodyT(opus55, "sys", toolsJSON, "", tail))
	expectStrips(t, c, "messages.1.content.0 prefix-changed", "messages.3.content.0 prefix-changed")
	s.mint(sent, r4)
	s.accept(c.ID, r4)
	tail = append(tail, r4, u("u5"))
	c, _ = s.compile(bodyT(opus55, "sys", toolsJSON, "", tail))
	expectStrips(t, c, "messages.1.content.0 released", "messages.3.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("S4")}) {
		t.Fatalf("kept %v", c.Kept)
	}
	// A simple compaction: one summary message, no thinking: nothing to check.
	c, _ = s.compile(bodyT(opus55, "sys", toolsJSON, "", []string{u("summary of everything"), u("go on")}))
	expectStrips(t, c)
}

func TestScenarioRetryAfter400DoesNotLoop(t *testing.T) { // 28
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	c, _ := s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	// The provider refused S1 for an edit bindery could not see.
	rel, err := ReleaseAtPath(c.Record, "messages.1.content.0")
	if err != nil || len(rel) != 2 {
		t.Fatalf("%+v %v", rel, err)
	}
	s.rel["main"] = map[Digest]bool{}
	for _, r := range rel {
		s.rel["main"][r.Key] = true
	}
	c2, _ := s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	expectStrips(t, c2, "messages.1.content.0 released", "messages.3.content.0 released")
}

func TestRewriteOnlyCuts(t *testing.T) { // 13, 22: never modify, never add cache_control
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	h[0] = u("edited")
	b := bodyT(opus55, "sys", toolsJSON, "", h)
	c, sent := s.compile(b)
	if len(c.Strips) != 2 {
		t.Fatalf("strips %v", reasons(c))
	}
	// Every byte sent is a byte of the host's body, in order.
	i := 0
	for _, ch := range sent {
		for i < len(b) && b[i] != ch {
			i++
		}
		if i == len(b) {
			t.Fatal("rewritten body is not a subsequence of the host's")
		}
		i++
	}
	if bytes.Count(sent, []byte("cache_control")) != bytes.Count(b, []byte("cache_control")) {
		t.Fatal("cache_control count changed")
	}
	if _, err := ParseRequest(sent); err != nil {
		t.Fatalf("rewritten body does not parse: %v", err)
	}
	// With nothing stripped the host's bytes go out unchanged.
	h[0] = u("u1")
	c, sent = s.compile(bodyT(opus55, "sys", toolsJSON, "", h))
	if len(c.Strips) != 0 || !bytes.Equal(sent, bodyT(opus55, "sys", toolsJSON, "", h)) {
		t.Fatal("unchanged body rewritten")
	}
}

func TestNotAMessagesBody(t *testing.T) {
	req, err := ParseRequest([]byte(`{"model":"gpt-9","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(CompileInput{ID: "x", Request: req, Engaged: true})
	if err != nil || c.Bound || c.Persist.Record != nil || len(c.Strips) != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := Compile(CompileInput{}); err != ErrNoRequest {
		t.Fatalf("nil request: %v", err)
	}
}

func TestNonBindingModelsKeepAll(t *testing.T) { // 46, 47: NB targets
	s := newSim(t)
	h := engagedWith(s, toolsJSON)
	h[0] = u("edited")
	for _, m := range []string{"claude-sonnet-5", "claude-opus-4-8", "claude-haiku-4-5-20251001", "anthropic/claude-sonnet-4.5"} {
		c, _ := s.compile(bodyT(m, "sys", toolsJSON, "", h))
		if c.Binds {
			t.Fatalf("%s binds", m)
		}
		// Opus 5.5 blocks are unreadable there: kept (the provider drops them
		// unread; they come back for a model that reads them), never released.
		expectStrips(t, c)
		if len(c.Record.Strips) != 0 || !c.Record.Kept[0].Unreadable || !c.Record.LastRead.IsZero() {
			t.Fatalf("%s: %+v", m, c.Record)
		}
	}
}
