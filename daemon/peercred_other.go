//go:build !linux

package daemon

import (
	"errors"
	"net"

	"github.com/my-pi/bindery/api"
)

// peerCred is implemented for Linux only (SO_PEERCRED). Elsewhere every
// connection is refused with this error, rather than served unchecked.
func peerCred(net.Conn) (api.Peer, error) {
	return api.Peer{}, errors.New("peer credentials are only checked on Linux; bindery refuses to serve without them")
}
