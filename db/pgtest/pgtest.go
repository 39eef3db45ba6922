// Package pgtest runs a throwaway PostgreSQL cluster for a test binary:
// Debian's postgresql package, initdb and pg_ctl as the postgres user
// when the tests run as root (initdb refuses root), a Unix socket in a
// temporary folder and no TCP port, fsync off; one database per test.
// PostgreSQL missing is a failure, never a skip: CI installs it (.ci/run),
// and a suite that passed by skipping would prove nothing.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running cluster.
type Server struct {
	dir string // the cluster's folder; its socket is in it
	bin string // the folder of initdb and pg_ctl
	// uid and gid run initdb and pg_ctl (the postgres user, when the
	// tests run as root); -1: the tests' own
	uid, gid int
}

var (
	once     sync.Once
	shared   *Server
	startErr error
	dbs      atomic.Int64
)

// Main runs the package's tests, then stops the cluster if one started:
// call it from TestMain.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain with more to do before it exits: it runs the
// tests, stops the cluster if one started, and returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	return code
}

// AdvisoryWaiters is how many sessions of dsn's database wait for an
// advisory lock now: a test that must know a reader is blocked behind a
// writer's lock (not guess it with a sleep) polls it.
func AdvisoryWaiters(t testing.TB, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("PostgreSQL: connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()`).Scan(&n); err != nil {
		t.Fatalf("PostgreSQL: pg_locks: %v", err)
	}
	return n
}

// Database makes a fresh database on the test binary's cluster (started
// on first use) and returns its DSN.
func Database(t testing.TB) string {
	t.Helper()
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		t.Fatalf("PostgreSQL: %v (install Debian's postgresql package: apt-get install -y postgresql)", startErr)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, shared.DSN("postgres"))
	if err != nil {
		t.Fatalf("PostgreSQL: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("PostgreSQL: create database: %v", err)
	}
	return shared.DSN(name)
}

// Cluster returns the test binary's cluster, started on first use.
func Cluster(t testing.TB) *Server {
	t.Helper()
	Database(t)
	return shared
}

// DSN names a database of the cluster, over its Unix socket.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=%s user=postgres dbname=%s sslmode=disable", s.dir, db)
}

// Restart stops the cluster at once (as a crash would) and starts it
// again: a test of what survives the server going away mid-work.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("PostgreSQL: stop: %v", err)
	}
	if err := s.startServer(); err != nil {
		t.Fatalf("PostgreSQL: start again: %v", err)
	}
}

// Stop stops the cluster (it is started again by Start): a test of an
// unreachable server.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("PostgreSQL: stop: %v", err)
	}
}

// Start starts a cluster Stop stopped.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.startServer(); err != nil {
		t.Fatalf("PostgreSQL: start: %v", err)
	}
}

func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bindery-pg")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, uid: -1, gid: -1}
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, initdb needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.uid, s.gid = uid, gid
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := s.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		return nil, err
	}
	if err := s.startServer(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) startServer() error {
	opts := "-k " + s.dir + " -c listen_addresses= -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200"
	return s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-w", "-o", opts, "start")
}

func (s *Server) stop() {
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

func (s *Server) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	asUser(cmd, s.uid, s.gid)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// binDir finds the newest of Debian's /usr/lib/postgresql/N/bin with
// initdb and pg_ctl, else the folder of initdb on PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if ok(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && ok(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no initdb and pg_ctl (neither /usr/lib/postgresql/*/bin nor PATH)")
}

func ok(dir string) bool {
	for _, n := range []string{"initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

func version(dir string) int {
	v, _ := strconv.Atoi(strings.Split(strings.TrimPrefix(dir, "/usr/lib/postgresql/"), "/")[0])
	return v
}
