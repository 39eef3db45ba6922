//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/my-pi/bindery/api"
)

// A full state folder answers 507 storage_full naming the folder (not
// "internal"), records nothing of the failed call, and the daemon serves
// again by itself once space is freed. The state folder is a real 3 MiB
// tmpfs, filled with a real file: this needs root (CAP_SYS_ADMIN) and is
// skipped without it.
func TestStorageFullE2E(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	mnt, err := os.MkdirTemp("", "bdfull")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=3m,mode=0700"); err != nil {
		os.Remove(mnt)
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { // after the daemon's own cleanup has stopped it
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
		os.Remove(mnt)
	})
	d := newDaemon(t, "--state-dir", mnt)
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	turn := func(conv string) error {
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Request: h.body(h.system)})
		if err != nil {
			return err
		}
		res := h.send(ans.Request, h.reply(false))
		_, err = d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply})
		return err
	}
	if err := turn("before"); err != nil {
		t.Fatal(err)
	}

	// Fill the filesystem.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", mnt, err)
			}
			break
		}
	}
	f.Close()

	// Calls that must write now fail as what they are. A long history
	// needs new pages for its compile record whatever the WAL holds free.
	for i := range 40 {
		h.messages = append(h.messages, map[string]any{"role": "assistant", "content": strings.Repeat("a", 8000)},
			map[string]any{"role": "user", "content": fmt.Sprintf("turn %d %s", i, strings.Repeat("u", 8000))})
	}
	var full *api.Error
	for i := range 20 {
		_, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: fmt.Sprintf("full-%d", i), Request: h.body(h.system)})
		if err == nil {
			continue // the WAL still had room for this one
		}
		e, ok := errors.AsType[*api.Error](err)
		if !ok {
			t.Fatalf("compile on a full disk: %v", err)
		}
		full = e
		break
	}
	if full == nil {
		t.Fatal("20 compiles of 640 KB histories succeeded on a full 3 MiB filesystem")
	}
	if full.Code != api.CodeStorageFull || full.Status != 507 || !strings.Contains(full.Message, mnt) {
		t.Fatalf("compile on a full disk: %d %s %q, want 507 storage_full naming %s", full.Status, full.Code, full.Message, mnt)
	}
	if _, err := d.client.Health(ctxT(t)); err != nil {
		t.Fatalf("health on a full disk: %v", err)
	}

	// Space is freed: bindery serves again, nothing restarted.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h.messages = h.messages[:1]
	if err := turn("after"); err != nil {
		t.Fatalf("a turn once space is freed: %v", err)
	}
	st, err := d.client.Conversation(ctxT(t), "before")
	if err != nil || st.Stamps != 1 {
		t.Fatalf("the conversation from before the disk filled: %+v %v", st, err)
	}
	var log strings.Builder
	json.NewEncoder(&log).Encode(full)
	t.Logf("answer on a full disk: %s", log.String())
}
