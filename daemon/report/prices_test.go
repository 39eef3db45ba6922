package report

import "testing"

func TestModelKeyAndRegime(t *testing.T) {
	cases := []struct {
		id, key string
		regime  Regime
	}{
		{"claude-sonnet-4-5-20250929", "sonnet-4.5", LastTurnOnly},
		{"claude-sonnet-4-5", "sonnet-4.5", LastTurnOnly},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "sonnet-4.5", LastTurnOnly},
		{"claude-3-7-sonnet-20250219", "sonnet-3.7", LastTurnOnly},
		{"claude-sonnet-4-20250514", "sonnet-4.0", LastTurnOnly},
		{"claude-sonnet-4-6", "sonnet-4.6", KeepAll},
		{"claude-sonnet-5", "sonnet-5.0", KeepAll},
		{"claude-opus-4-1", "opus-4.1", LastTurnOnly},
		{"claude-3-opus-20240229", "opus-3.0", LastTurnOnly},
		{"claude-opus-4-5", "opus-4.5", KeepAll},
		{"claude-opus-5-5", "opus-5.5", KeepAll},
		{"claude-haiku-4-5", "haiku-4.5", LastTurnOnly},
		{"claude-3-5-haiku-20241022", "haiku-3.5", LastTurnOnly},
		{"claude-haiku-5-5", "haiku-5.5", UnknownRegime},
		{"claude-fable-5-1", "fable-5.1", KeepAll},
		{"claude-mythos-5", "mythos-5.0", KeepAll},
		{"claude-fable-5-2", "fable-5.2", UnknownRegime},
		{"claude-mythos-preview", "mythos-preview", KeepAll},
		{"gpt-5", "gpt-5", UnknownRegime},
		{"", "", UnknownRegime},
	}
	for _, c := range cases {
		eq(t, "key of "+c.id, ModelKey(c.id), c.key)
		eq(t, "regime of "+c.id, RegimeOf(c.id), c.regime)
	}
}

func TestPriceTable(t *testing.T) {
	p := DefaultPrices()
	s, ok := p.Lookup("claude-sonnet-4-5-20250929")
	if !ok || *s.Input != 3 || *s.Output != 15 || *s.CacheWrite != 3.75 || *s.CacheRead != 0.30 || s.Source == "" {
		t.Errorf("sonnet 4.5 = %+v", s)
	}
	f, ok := p.Lookup("claude-fable-5-2")
	if !ok || *f.Input != 8 || *f.CacheRead != 0.20 || *f.CacheWrite != 10 || f.Output != nil {
		t.Errorf("fable 5.2 = %+v", f)
	}
	if _, ok := p.Lookup("claude-opus-5-5"); ok {
		t.Error("opus 5.5 has no cited base price")
	}
	// Every built-in row cites a source.
	for k, v := range p.Rows() {
		if v.Source == "" {
			t.Errorf("%s: no source", k)
		}
	}

	over, err := ParsePrices([]byte(`{"claude-opus-5-5": {"input": 15, "output": 75, "cacheWrite": 18.75, "cacheRead": 0.75, "source": "test"},
		"sonnet-4.5": {"input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1, "source": "test"}}`))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := over.Lookup("claude-opus-5-5-20261001")
	if !ok || *o.Input != 15 {
		t.Errorf("override opus 5.5 = %+v", o)
	}
	if s, _ := over.Lookup("claude-sonnet-4-5"); *s.Input != 1 {
		t.Errorf("override of a built-in row = %+v", s)
	}
	if over.Fingerprint() == p.Fingerprint() {
		t.Error("fingerprint ignores overrides")
	}
	for _, bad := range []string{`{"x": {"input": -1}}`, `{"x": {"inptu": 1}}`, `[1]`, `{`} {
		if _, err := ParsePrices([]byte(bad)); err == nil {
			t.Errorf("ParsePrices(%s) accepted", bad)
		}
	}
}

func TestReadMultipliers(t *testing.T) {
	// A break priced from pi's cost with no cache read on the request
	// falls back on the documented read multiplier: write/1.25*read.
	for key, want := range map[string]float64{"opus-5.5": 0.05, "fable-5.1": 0.025, "mythos-5.1": 0.025, "fable-5.2": 0.025, "sonnet-4.5": 0.1} {
		got, ok := readMultiplier(key)
		if !ok || got != want {
			t.Errorf("read multiplier of %s = %v %v, want %v", key, got, ok, want)
		}
	}
	if _, ok := readMultiplier("mythos-5.2"); ok {
		t.Error("mythos 5.2 has no documented read multiplier")
	}
	if _, ok := readMultiplier("gpt-5"); ok {
		t.Error("non-Claude models have no multiplier")
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{}
	eq(t, "empty", h.Quantile(0.5), 0)
	for v := 1; v <= 10; v++ {
		h.Add(v, 1)
	}
	eq(t, "median of 1..10", h.Quantile(0.5), 5)
	eq(t, "p90 of 1..10", h.Quantile(0.9), 9)
	eq(t, "p100", h.Quantile(1), 10)
}
