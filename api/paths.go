package api

import (
	"errors"
	"path/filepath"
)

// Where the daemon listens by default, resolved the same way by the daemon
// and by every client (getenv is os.Getenv outside tests):
//
//  1. $BINDERY_SOCKET
//  2. $RUNTIME_DIRECTORY/bindery.sock   (systemd's RuntimeDirectory=bindery)
//  3. $XDG_RUNTIME_DIR/bindery/bindery.sock
//  4. <state dir>/run/bindery.sock      (no runtime dir: ssh without pam_systemd, containers)
func DefaultSocket(getenv func(string) string) (string, error) {
	if s := getenv("BINDERY_SOCKET"); s != "" {
		return s, nil
	}
	if d := getenv("RUNTIME_DIRECTORY"); d != "" {
		return filepath.Join(firstPath(d), "bindery.sock"), nil
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "bindery", "bindery.sock"), nil
	}
	state, err := DefaultStateDir(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(state, "run", "bindery.sock"), nil
}

// DefaultStateDir is where the database lives by default:
// $BINDERY_STATE_DIR, else $STATE_DIRECTORY (systemd's StateDirectory=),
// else $XDG_STATE_HOME/bindery, else ~/.local/state/bindery.
func DefaultStateDir(getenv func(string) string) (string, error) {
	if d := getenv("BINDERY_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := getenv("STATE_DIRECTORY"); d != "" {
		return firstPath(d), nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "bindery"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "bindery"), nil
	}
	return "", errors.New("no state directory: set BINDERY_STATE_DIR, XDG_STATE_HOME or HOME")
}

// firstPath takes the first of systemd's colon-separated directory lists.
func firstPath(list string) string {
	for i := range len(list) {
		if list[i] == ':' {
			return list[:i]
		}
	}
	return list
}
