package api

import (
	"context"
	"strings"
	"testing"
)

func TestAccountFingerprint(t *testing.T) {
	salt := []byte("0123456789abcdef0123456789abcdef")
	fp := AccountFingerprint(salt, "x-api-key", "sk-ant-api03-secret")
	if !isAccountFingerprint(fp) || strings.Contains(fp, "secret") {
		t.Fatalf("fingerprint %q", fp)
	}
	if AccountFingerprint(salt, "x-api-key", "sk-ant-api03-secret") != fp {
		t.Fatal("not deterministic")
	}
	for name, other := range map[string]string{
		"another key":  AccountFingerprint(salt, "x-api-key", "sk-ant-api03-other"),
		"another kind": AccountFingerprint(salt, "bearer", "sk-ant-api03-secret"),
		"another salt": AccountFingerprint([]byte("another salt of thirty-two bytes"), "x-api-key", "sk-ant-api03-secret"),
	} {
		if other == fp || !isAccountFingerprint(other) {
			t.Errorf("%s: %q", name, other)
		}
	}
	if AccountFingerprint(salt, "x-api-key", "") != "" || AccountFingerprint(nil, "x-api-key", "k") != "" {
		t.Fatal("no credential or no salt must give no fingerprint")
	}
}

// A compile's account goes through the client to the daemon; anything but
// a fingerprint is refused, and the refusal never repeats what was sent
// (a host that got it wrong may have sent the credential).
func TestCompileAccount(t *testing.T) {
	s, _ := testServer()
	eb := &echoBinder{}
	s.Binder = eb
	c := NewClient(serveUnix(t, s, selfPeer))
	ctx := context.Background()
	salt, err := c.AccountSalt(ctx)
	if err != nil || string(salt) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("salt %q, %v", salt, err)
	}
	fp := AccountFingerprint(salt, "x-api-key", "sk-ant-api03-secret")
	req := []byte(`{"model":"claude-sonnet-5-5","messages":[]}`)
	if _, err := c.Compile(ctx, &CompileCall{Conversation: "cv", Account: fp, Request: req}); err != nil || eb.account != fp {
		t.Fatalf("account %q, %v", eb.account, err)
	}
	for _, bad := range []string{"sk-ant-api03-secret", strings.ToUpper(fp), fp + "0", fp[:31] + "g"} {
		_, err := c.Compile(ctx, &CompileCall{Conversation: "cv", Account: bad, Request: req})
		e, ok := err.(*Error)
		if !ok || e.Code != CodeBadRequest || !strings.Contains(e.Message, `"account" is not a fingerprint`) {
			t.Fatalf("account %q: %v", bad, err)
		}
		if strings.Contains(e.Message, bad) {
			t.Fatalf("the refusal repeats the account: %s", e.Message)
		}
	}
}

func TestAccountAliasCall(t *testing.T) {
	s, _ := testServer()
	eb := &echoBinder{}
	s.Binder = eb
	c := NewClient(serveUnix(t, s, selfPeer))
	salt := []byte("0123456789abcdef0123456789abcdef")
	key, org := AccountFingerprint(salt, "x-api-key", "sk-1"), AccountFingerprint(salt, "organization", "org-1")
	a, err := c.AccountAlias(context.Background(), AccountAlias{Fingerprint: key, Account: org})
	if err != nil || !a.Added || eb.alias.Fingerprint != key || eb.alias.Account != org {
		t.Fatalf("%+v %v %+v", a, err, eb.alias)
	}
	for _, bad := range []AccountAlias{{Fingerprint: "sk-1", Account: org}, {Fingerprint: key, Account: "org-1"}, {Fingerprint: key, Account: key}, {}} {
		_, err := c.AccountAlias(context.Background(), bad)
		if e, ok := err.(*Error); !ok || e.Code != CodeBadRequest || strings.Contains(e.Message, "sk-1") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
