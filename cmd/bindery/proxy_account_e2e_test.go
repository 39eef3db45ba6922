package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/my-pi/bindery/binding/judgetest"
)

const otherAPIKey = "sk-ant-api03-SECOND-KEY-NEVER-LOG-9876543210"

// TestProxyAccountBoundThinking: Sonnet 5.5 blocks are read only in the
// account that minted them (research 1.5, 3). A host that switches API
// keys midway (another organization's key) would send them where the
// provider drops them unread (organization_binding_mismatch, the cache
// rewritten from there); through the proxy no block goes out under a
// credential other than its own, every request carries exactly the blocks
// the provider reads for its account, and nothing is released: back on
// the first key, its blocks are sent and read again. Neither key is
// written anywhere bindery writes.
func TestProxyAccountBoundThinking(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetStream(true, 0)
	h := newAPIHost(t, pe.addr, "claude-sonnet-5-5")
	keys := []string{testAPIKey, testAPIKey, otherAPIKey, otherAPIKey, testAPIKey, testAPIKey}
	for i, key := range keys {
		h.header.Set("x-api-key", key)
		h.user("question " + string(rune('a'+i)))
		h.turn()
	}
	got := pe.up.Messages()
	if len(got) != len(keys) {
		t.Fatalf("upstream got %d requests for %d turns", len(got), len(keys))
	}
	// What the provider reads in each request's account, of the host's
	// own request and of what the proxy sent.
	wantRead := []int{0, 1, 0, 1, 2, 3}
	for i, r := range got {
		if r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Refused)
		}
		acct := keys[i]
		for _, v := range r.Result.Blocks {
			if v.Fate == judgetest.FateDroppedAccount {
				t.Errorf("request %d: a block minted under another key was sent (%s)", i, v.Path)
			}
		}
		max, err := pe.up.Judge.MaxAs(acct, h.sent[i])
		if err != nil {
			t.Fatal(err)
		}
		if read := len(r.Result.Read()); read != max || read != wantRead[i] {
			t.Errorf("request %d: the provider read %d blocks; the most it could read is %d, want %d", i, read, max, wantRead[i])
		}
	}
	// Without bindery: the host's third request (the first on the other
	// key) carries the two blocks the first key minted, which the provider
	// drops unread.
	direct := pe.up.Judge.Judge(judgetest.Call{Body: h.sent[2], Account: otherAPIKey, Beta: true})
	dropped := 0
	for _, tr := range direct.Transformations {
		if tr.Reason == "organization_binding_mismatch" {
			dropped++
		}
	}
	if dropped != 2 {
		t.Errorf("sent directly, the provider drops %d blocks of the other account; want 2 (%+v)", dropped, direct.Transformations)
	}
	out := pe.feed()
	if !strings.Contains(out, `"account-mismatch"`) {
		t.Errorf("no account-mismatch strip in the feed:\n%.3000s", out)
	}
	if strings.Contains(out, `"type":"release"`) {
		t.Errorf("an account mismatch was released:\n%.3000s", out)
	}
	pe.checkNoCredential(otherAPIKey)
}

const sameOrgAPIKey = "sk-ant-api03-SAME-ORG-KEY-NEVER-LOG-5555"

// TestProxyKeysOfOneOrganization: the provider names each answer's
// organization (anthropic-organization-id), and the proxy tells the daemon
// which organization each key belongs to. A second key of the first key's
// organization then reads the first key's Sonnet 5.5 blocks; a key of
// another organization never gets them. A key's first request, before any
// answer named its organization, is taken as another account (its blocks
// stripped, not released): the one request the rule costs.
func TestProxyKeysOfOneOrganization(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetStream(true, 0)
	pe.up.SetAccounts(map[string]string{testAPIKey: "org-a", sameOrgAPIKey: "org-a", otherAPIKey: "org-b"})
	account := map[string]string{testAPIKey: "org-a", sameOrgAPIKey: "org-a", otherAPIKey: "org-b"}
	h := newAPIHost(t, pe.addr, "claude-sonnet-5-5")
	keys := []string{testAPIKey, testAPIKey, sameOrgAPIKey, sameOrgAPIKey, sameOrgAPIKey, otherAPIKey, testAPIKey}
	for i, key := range keys {
		h.header.Set("x-api-key", key)
		h.user("question " + string(rune('a'+i)))
		h.turn()
	}
	got := pe.up.Messages()
	if len(got) != len(keys) {
		t.Fatalf("upstream got %d requests for %d turns", len(got), len(keys))
	}
	reads := make([]int, len(got))
	for i, r := range got {
		if r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Refused)
		}
		for _, v := range r.Result.Blocks {
			if v.Fate == judgetest.FateDroppedAccount {
				t.Errorf("request %d: a block of another organization was sent (%s)", i, v.Path)
			}
		}
		max, err := pe.up.Judge.MaxAs(account[keys[i]], h.sent[i])
		if err != nil {
			t.Fatal(err)
		}
		reads[i] = len(r.Result.Read())
		switch {
		case i == 2:
			// The second key's first request: its organization unknown yet.
			if reads[i] != 0 || max != 2 {
				t.Errorf("request 2: read %d of the most %d; want 0 of 2", reads[i], max)
			}
		case reads[i] != max:
			t.Errorf("request %d: the provider read %d blocks; the most it could read is %d", i, reads[i], max)
		}
	}
	t.Logf("blocks read per request: %v", reads)
	// Once the second key is known to be of the first key's organization,
	// the first key's blocks go out under it (request 3 reads the two the
	// first key minted; the one minted with them stripped is stale), and
	// under the other organization's key nothing of theirs does; back on
	// the first key, every block of the organization still valid is read.
	if want := []int{0, 1, 0, 2, 3, 0, 4}; !slices.Equal(reads, want) {
		t.Errorf("blocks read per request %v, want %v", reads, want)
	}
	pe.checkNoCredential(otherAPIKey, sameOrgAPIKey)
}
