package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
)

// privateDir creates dir (and parents) with mode 0700, or checks an
// existing one: it must be ours, and not writable by others unless sticky
// (like /tmp), or someone else could swap the socket or lock inside it. An
// existing folder's mode is never changed: it may be the user's home.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() && !(uid == 0 && fi.Mode()&fs.ModeSticky != 0) {
		return fmt.Errorf("%s belongs to uid %d, not to us (uid %d): refusing to keep bindery's files there", dir, uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s is writable by other users (mode %v): refusing to keep bindery's files there; use a private folder", dir, fi.Mode().Perm())
	}
	return nil
}

// lock is an exclusive flock on a file, held for the daemon's life. The
// kernel drops it when the process dies, however it dies, so a crash never
// leaves a stale lock.
type lock struct {
	f    *os.File
	path string
}

// ErrLocked is wrapped by the error of a lock another live process holds.
var ErrLocked = errors.New("in use by another bindery")

func acquireLock(path, what string) (*lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, errWouldBlock) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b[:n]))); perr == nil {
				holder = fmt.Sprintf("pid %d", pid)
			}
			return nil, fmt.Errorf("%s %s is %w (%s holds %s): stop it first, or give this one another --state-dir/--db/--socket", what, strings.TrimSuffix(path, ".lock"), ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &lock{f: f, path: path}, nil
}

// release unlocks. The file stays: removing it would race a newcomer that
// opened it already.
func (l *lock) release() {
	if l != nil {
		l.f.Close()
	}
}

// listenSocket listens on path inside its private folder. A leftover file
// from a crash is replaced, but only after a dial shows nothing answers on
// it; a live socket or a file that is not a socket is never touched.
//
// The listener does not unlink its path on close (net's default would
// remove whatever is at the path by then): the returned remove deletes the
// path only while it is still the socket this call created, the same
// device and inode, so a file or another daemon's socket put there since
// is left alone.
func listenSocket(path string) (ln *net.UnixListener, remove func() error, err error) {
	ln, err = listenUnix(path)
	if err != nil {
		return nil, nil, err
	}
	ln.SetUnlinkOnClose(false)
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return ln, func() error { return removeIfSame(path, fi) }, nil
}

// removeIfSame removes path if it is still the file ours describes.
func removeIfSame(path string, ours fs.FileInfo) error {
	now, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if !os.SameFile(ours, now) || now.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is no longer the socket this daemon created (replaced by a %v): left in place", path, now.Mode().Type())
	}
	return os.Remove(path)
}

func listenUnix(path string) (*net.UnixListener, error) {
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket: refusing to replace it", path)
	case err == nil:
		c, derr := net.DialTimeout("unix", path, time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s is %w: something is answering on it", path, ErrLocked)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Inside a 0700 folder the moment before chmod exposes nothing.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// peerContext is http.Server.ConnContext: it reads the peer's credentials
// (SO_PEERCRED, as of connect time) once per connection, for api's check.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	p, err := peerCred(c)
	return api.WithPeer(ctx, p, err)
}

// notify sends a state to systemd ($NOTIFY_SOCKET; a leading '@' is the
// abstract namespace). Without systemd it does nothing.
func notify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", addr, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", addr, err)
	}
	return nil
}
