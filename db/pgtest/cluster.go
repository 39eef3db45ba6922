// Package pgtest runs a throwaway PostgreSQL server for tests: one cluster per
// test binary, started on first use, one fresh database per test, stopped by
// Main when the binary's tests end. It needs Debian's postgresql binaries
// (initdb, pg_ctl) and fails, never skips, when they are missing: a suite
// that passes by skipping the shared tier would prove nothing (.ci/run
// installs the package).
//
// The server listens on a Unix socket in its own temp folder and on no TCP
// port, so parallel test binaries never collide. initdb refuses to run as
// root, so under root the cluster runs as the postgres user.
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
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Cluster is one running throwaway server.
type Cluster struct {
	dir  string // the socket folder, the data folder and the log
	bin  string // folder of initdb and pg_ctl
	run  func(*exec.Cmd)
	user string // the superuser initdb made
	n    atomic.Int64
}

var (
	once    sync.Once
	shared  *Cluster
	started error
)

// Main runs the test binary's tests and stops the cluster if one was
// started: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// DSN makes a fresh database on the test binary's cluster (starting the
// cluster on first use) and returns a DSN for it. It fails the test when
// PostgreSQL cannot be started.
func DSN(t testing.TB) string {
	t.Helper()
	once.Do(func() { shared, started = Start() })
	if started != nil {
		t.Fatalf("pgtest: %v", started)
	}
	dsn, err := shared.NewDatabase(t.Context())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Start makes and starts a new cluster; the caller stops it.
func Start() (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	// the socket path must fit sun_path (~107 bytes), so the folder is made
	// under /tmp rather than a possibly long TMPDIR
	dir, err := os.MkdirTemp("/tmp", "pgtest")
	if err != nil {
		return nil, fmt.Errorf("make the cluster's folder: %w", err)
	}
	c := &Cluster{dir: dir, bin: bin, run: func(*exec.Cmd) {}}
	c.user = "postgres"
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the postgres user (Debian's postgresql package makes it): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("hand %s to postgres: %w", dir, err)
		}
		c.run = func(cmd *exec.Cmd) { runAs(cmd, uint32(uid), uint32(gid)) }
	}
	if err := c.pg("initdb", "-D", c.data(), "-U", c.user, "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// fsync off: a test cluster is thrown away, its durability is not the
	// one under test (the outbox's is, in SQLite)
	opts := "-k " + dir + " -c listen_addresses= -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
	if err := c.pg("pg_ctl", "-D", c.data(), "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// Dir is the folder of the cluster's Unix socket (a DSN's host).
func (c *Cluster) Dir() string { return c.dir }

// DSN is a connection string for database db as the cluster's superuser.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("host=%s user=%s dbname=%s sslmode=disable", c.dir, c.user, db)
}

// NewDatabase makes an empty database with a name no other test has and
// returns its DSN.
func (c *Cluster) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.n.Add(1))
	if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return c.DSN(name), nil
}

// Exec runs one SQL statement in db through psql, so the helper needs no
// driver of its own and tests can act on the server behind the code's back
// (a role, a grant, a terminated connection).
func (c *Cluster) Exec(ctx context.Context, db, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", c.dir, "-U", c.user, "-d", db, "-c", sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("psql %q in %s: %w: %s", sql, db, err, out)
	}
	return nil
}

// Stop stops the server (pg_ctl -m fast) and removes its folder.
func (c *Cluster) Stop() error {
	err := c.pg("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop")
	if rmErr := os.RemoveAll(c.dir); err == nil {
		err = rmErr
	}
	return err
}

// Restart stops the server and starts it on the same data, as a team's
// server restarted under a running bindery.
func (c *Cluster) Restart() error {
	opts := "-k " + c.dir + " -c listen_addresses= -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
	return c.pg("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-m", "fast", "-w", "-t", "60", "-o", opts, "restart")
}

func (c *Cluster) pg(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	c.run(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}

// findBin finds the folder of initdb and pg_ctl: Debian keeps them out of
// PATH in /usr/lib/postgresql/VERSION/bin; the newest version wins.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	return findBinIn(dirs)
}

// findBinIn looks in PATH's initdb's folder first, then in dirs.
func findBinIn(dirs []string) (string, error) {
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append([]string{filepath.Dir(real)}, dirs...)
		}
	}
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) && isFile(filepath.Join(d, "psql")) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl, psql) in /usr/lib/postgresql/*/bin or on PATH: install Debian's postgresql package (apt-get install -y postgresql)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
