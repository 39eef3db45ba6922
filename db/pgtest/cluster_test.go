package pgtest

import (
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestDatabasePerTest: each call makes its own database on the one cluster,
// reachable through the socket and nothing else.
func TestDatabasePerTest(t *testing.T) {
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls gave the same database: %s", a)
	}
	for _, dsn := range []string{a, b} {
		if !strings.Contains(dsn, "host=/tmp/pgtest") {
			t.Fatalf("DSN %q is not on the cluster's socket folder", dsn)
		}
		db := dsn[strings.Index(dsn, "dbname=")+len("dbname="):]
		db, _, _ = strings.Cut(db, " ")
		if err := shared.Exec(t.Context(), db, "CREATE TABLE x (a int); INSERT INTO x VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(shared.Dir() + "/.s.PGSQL.5432"); err != nil {
		t.Fatalf("no Unix socket in the cluster's folder: %v", err)
	}
	// no TCP: listen_addresses is empty
	if err := shared.Exec(t.Context(), "postgres", "DO $$ BEGIN IF current_setting('listen_addresses') <> '' THEN RAISE 'listening on %', current_setting('listen_addresses'); END IF; END $$"); err != nil {
		t.Fatal(err)
	}
}

// TestMissingBinariesFail: without the binaries the helper reports what to
// install instead of skipping.
func TestMissingBinariesFail(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinIn(nil)
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Fatalf("err = %v, want the install hint", err)
	}
}
