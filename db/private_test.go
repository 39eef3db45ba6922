//go:build unix

package db

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The database, its WAL and its shared-memory file are 0600 whatever the
// umask: the daemon run by hand has the usual 0022.
func TestDatabaseFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "bindery.db")
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Ingest(t.Context(), Batch{Kind: Found, Path: "/s/a.jsonl", Cursor: Cursor{Path: "/s/a.jsonl", Ino: 1, Offset: 10, Lines: 1},
		Header: &Header{ID: "s", Version: 3, Cwd: "/"}}); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, path)
}

// A database a release before this one created 0644 is narrowed on open.
func TestDatabaseFilesNarrowed(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "bindery.db")
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Reopen while the first handle keeps -wal and -shm in place.
	d2, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, path)
	d2.Close()
	d.Close()
}

func checkPrivate(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v (expected the file to exist while the database is open)", p, err)
			continue
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), got)
		}
	}
}
