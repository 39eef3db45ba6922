package sharedtier

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db/pgtest"
)

// superExec runs statements as the cluster's superuser.
func superExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx := context.Background() // also from a cleanup, after t.Context ended
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestTeamRoleHasOnlyItsOwnGrants: the role README "Sharing across
// machines" documents (LOGIN, owner of its team's database, nothing else:
// no superuser, no CREATEDB, no CREATEROLE) is all bindery needs: it
// migrates, ships and reads. Another team's role cannot connect to that
// database, so it reads none of its rows; nor can the first team's role
// read the second's.
func TestTeamRoleHasOnlyItsOwnGrants(t *testing.T) {
	super := pgtest.Cluster(t).DSN("postgres")
	superExec(t, super,
		`CREATE ROLE bindery_red LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'red-pw'`,
		`CREATE ROLE bindery_blue LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'blue-pw'`,
		`CREATE DATABASE bindery_red OWNER bindery_red`,
		`CREATE DATABASE bindery_blue OWNER bindery_blue`,
		`REVOKE ALL ON DATABASE bindery_red FROM PUBLIC`,
		`REVOKE ALL ON DATABASE bindery_blue FROM PUBLIC`,
	)
	t.Cleanup(func() {
		superExec(t, super, `DROP DATABASE bindery_red WITH (FORCE)`, `DROP DATABASE bindery_blue WITH (FORCE)`,
			`DROP ROLE bindery_red`, `DROP ROLE bindery_blue`)
	})
	dsn := func(role, db string) string {
		return strings.Replace(pgtest.Cluster(t).DSN(db), "user=postgres", "user="+role+" password="+role+"-pw", 1)
	}
	red, err := Open(dsn("bindery_red", "bindery_red"), "red-laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer red.Close()
	if err := red.Migrate(t.Context()); err != nil {
		t.Fatalf("the team's own role could not make its schema: %v", err)
	}
	if _, err := red.PutStamps(t.Context(), stampRows("red", 3)); err != nil {
		t.Fatalf("the team's own role could not ship: %v", err)
	}
	got, err := red.Stamps(t.Context(), keysOf(stampRows("red", 3)))
	if err != nil || len(got) != 3 {
		t.Fatalf("the team's own role read %d stamps: %v", len(got), err)
	}

	for _, c := range []struct{ role, db string }{{"bindery_blue", "bindery_red"}, {"bindery_red", "bindery_blue"}} {
		other, err := Open(dsn(c.role, c.db), "intruder")
		if err != nil {
			t.Fatal(err)
		}
		got, err := other.Stamps(t.Context(), []binding.Digest{digest("red/0")})
		other.Close()
		if err == nil || len(got) != 0 {
			t.Fatalf("%s read %s: %d stamps, err %v", c.role, c.db, len(got), err)
		}
		if !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s on %s: %v; want permission denied", c.role, c.db, err)
		}
		if strings.Contains(err.Error(), "-pw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

// TestTLSWhenTheDSNAsks: a DSN with sslmode=verify-full connects over TLS
// and checks the server's certificate against the CA it names (every
// connection of the pool is encrypted, as the server sees them); a CA
// that did not sign it is refused; a server without TLS is refused when
// the DSN requires it, never used in the clear.
func TestTLSWhenTheDSNAsks(t *testing.T) {
	srv := pgtest.StartTLS(t)
	superExec(t, srv.DSN("postgres"), `CREATE DATABASE team`)
	s, err := Open(srv.TCPDSN("team", "verify-full", "sslrootcert="+srv.CA+" password=tls-pw-NEVER-SHOWN"), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	if _, err := s.PutStamps(t.Context(), stampRows("tls", 2)); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var all, encrypted int
	err = conn.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.datname = 'team'`).Scan(&all, &encrypted)
	conn.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if all == 0 || encrypted != all {
		t.Errorf("%d of the pool's %d connections are encrypted", encrypted, all)
	}

	wrong, err := Open(srv.TCPDSN("team", "verify-full", "sslrootcert="+pgtest.OtherCA(t)+" password=tls-pw-NEVER-SHOWN"), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	err = wrong.Migrate(t.Context())
	wrong.Close()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a server whose certificate the named CA did not sign: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "tls-pw-NEVER-SHOWN") {
		t.Errorf("the error shows the password: %v", err)
	}

	srv.RestartWithoutTLS(t)
	plain, err := Open(srv.TCPDSN("team", "require", "password=tls-pw-NEVER-SHOWN"), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	err = plain.Migrate(t.Context())
	plain.Close()
	if err == nil {
		t.Error("sslmode=require went on with a server without TLS")
	} else if strings.Contains(err.Error(), "tls-pw-NEVER-SHOWN") {
		t.Errorf("the error shows the password: %v", err)
	}
	// The same server, the same database, without TLS asked: it answers
	// (the refusal above was TLS's, not the server's).
	inClear, err := Open(srv.TCPDSN("team", "disable", ""), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer inClear.Close()
	if err := inClear.Migrate(t.Context()); err != nil {
		t.Fatalf("the server without TLS, in the clear: %v", err)
	}
}
