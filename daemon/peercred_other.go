//go:build !linux && !darwin

package daemon

import (
	"errors"
	"net"

	"github.com/my-pi/bindery/api"
)

// peerCred is implemented for Linux (SO_PEERCRED) and macOS
// (LOCAL_PEERCRED). Elsewhere (Windows) every connection is refused with
// this error, rather than served unchecked.
func peerCred(net.Conn) (api.Peer, error) {
	return api.Peer{}, errors.New("peer credentials are checked only on Linux and macOS; bindery refuses to serve without them")
}
