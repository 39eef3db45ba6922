package daemon

import (
	"context"
	"fmt"
)

// convLock serializes one conversation's calls. Unlike sync.Mutex, a
// waiter gives up when its context ends: a call whose client went away
// while another call held the conversation leaves the queue at once
// instead of running (and holding the conversation in turn) for nobody.
type convLock struct{ ch chan struct{} }

func newConvLock() convLock { return convLock{ch: make(chan struct{}, 1)} }

// Lock waits for the conversation, or returns ctx's error.
func (l convLock) Lock(ctx context.Context, id string) error {
	select {
	case l.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for conversation %q: %w", id, context.Cause(ctx))
	}
}

// TryLock takes the conversation if it is free.
func (l convLock) TryLock() bool {
	select {
	case l.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unlock releases the conversation.
func (l convLock) Unlock() {
	select {
	case <-l.ch:
	default:
		panic("daemon: unlock of an unlocked conversation")
	}
}
