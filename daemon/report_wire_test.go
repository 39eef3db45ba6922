package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{}
	cfg := Config{StateDir: dir, Getenv: func(k string) string { return env[k] }}

	// No file: the built-in table.
	p, err := loadPrices(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Lookup("claude-opus-5-5"); ok {
		t.Error("built-in table prices opus 5.5")
	}
	// <state dir>/prices.json overrides it.
	if err := os.WriteFile(filepath.Join(dir, PricesFileName), []byte(`{"claude-opus-5-5": {"input": 15, "source": "t"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err = loadPrices(cfg); err != nil {
		t.Fatal(err)
	} else if o, ok := p.Lookup("claude-opus-5-5"); !ok || *o.Input != 15 {
		t.Errorf("state-dir override: %+v", o)
	}
	// $BINDERY_PRICES names another file; a missing one is an error.
	env["BINDERY_PRICES"] = filepath.Join(dir, "nope.json")
	if _, err := loadPrices(cfg); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing explicit file: %v", err)
	}
	// A malformed file is an error naming it.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"x": {"input": "cheap"}}`), 0o644)
	env["BINDERY_PRICES"] = bad
	if _, err := loadPrices(cfg); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("malformed file: %v", err)
	}
}
