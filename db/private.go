package db

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// privateFiles makes the database file exist with mode 0600 before SQLite
// opens it, and narrows to 0600 the database, -wal and -shm files a
// release before this one created 0644. SQLite creates -wal and -shm with
// the main file's mode, so a private main file keeps all three private
// whatever the process umask (a daemon run by hand has 0022). The folder
// is private too (the daemon makes it 0700), but a file's own mode is what
// still protects it when the folder is shared or its mode is changed.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("make %s private (mode %v): %w", p, fi.Mode().Perm(), err)
			}
		}
	}
	return nil
}
