package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/my-pi/bindery/api"
)

// Account-bound models (research 1.5, 3: Sonnet 5.5, Haiku 5.5) read a
// block only in the account that minted it. The proxy tells the daemon
// which credential each request goes out under by its fingerprint
// (api.AccountFingerprint under the store's salt); the credential itself
// never leaves this process, and is never logged. Which credential, in
// this order (decisions, README "Accounts"):
//   - x-api-key: the key (an organization's keys are told apart: a key
//     is not known to be of one account with another);
//   - Authorization: Bearer with metadata.user_id naming an account_uuid
//     (Claude Code signed in with its OAuth login): the account's uuid, so
//     the access token refreshing every few hours is not a new account;
//   - Authorization: Bearer otherwise: the token;
//   - none of these: no account (""), never compared: a gateway beyond
//     the proxy that adds its own credential is one account or it is not,
//     and bindery cannot tell.

// accountSalt is the store's salt once the daemon gave it. One request
// asks for it at a time; the others wait for that answer, each no longer
// than a compile may take.
type accountSalt struct {
	mu     sync.Mutex
	salt   []byte
	asking chan struct{} // closed when the ask in flight ends; nil: none
	// after a failed ask, no other until then: a daemon from before
	// accounts answers 404 each time, and each request would pay for it
	notBefore time.Time
	// learned holds the aliases this process told the daemon, credential
	// fingerprint to organization fingerprint (learnAccount).
	learned map[string]string
}

// saltRetry is how long the proxy goes without asking for the salt again
// when the daemon has no such endpoint (a release from before accounts);
// after any other failure it asks again after ProbeInterval.
const saltRetry = 30 * time.Second

// maxLearned bounds accountSalt.learned; past it, it starts again (the
// daemon answers a repeated alias as already known).
const maxLearned = 4096

// learnAccount tells the daemon which organization the credential of c
// belongs to, as the provider's answer named it (anthropic-organization-id,
// on every answer of the Anthropic API): two keys of one organization are
// then one account, and a key's blocks go out under the other. Once per
// credential per process; before the accept, so the history's next compile
// already reads it.
func (p *Proxy) learnAccount(ctx context.Context, c *compiled) {
	org := hint(c.org)
	if c.id.account == "" || org == "" {
		return
	}
	s := &p.salt
	s.mu.Lock()
	salt := s.salt
	orgFP := api.AccountFingerprint(salt, "organization", org)
	known := s.learned[c.id.account] == orgFP
	s.mu.Unlock()
	if salt == nil || known || orgFP == c.id.account {
		return
	}
	a, err := p.client.AccountAlias(ctx, api.AccountAlias{Fingerprint: c.id.account, Account: orgFP})
	if err != nil {
		p.log.Warn("proxy: could not tell bindery which organization a credential belongs to", c.logAttr(), "err", err)
		return
	}
	if a.Account != orgFP {
		p.log.Warn("proxy: a credential answered for another organization than bindery knows it by; bindery keeps the first", c.logAttr())
	}
	s.mu.Lock()
	if s.learned == nil || len(s.learned) >= maxLearned {
		s.learned = map[string]string{}
	}
	s.learned[c.id.account] = orgFP
	s.mu.Unlock()
}

// account is the fingerprint of the credential r goes out under, "" when
// it has none or the daemon's salt cannot be had (a daemon that does not
// answer fails the compile open anyway).
func (p *Proxy) account(ctx context.Context, h http.Header, userID string) string {
	kind, cred := credential(h, userID)
	if cred == "" {
		return ""
	}
	salt := p.salt.get(ctx, p)
	if salt == nil {
		return ""
	}
	return api.AccountFingerprint(salt, kind, cred)
}

func (s *accountSalt) get(ctx context.Context, p *Proxy) []byte {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CompileTimeout)
	defer cancel()
	s.mu.Lock()
	if s.salt != nil || p.health.isDown() || time.Now().Before(s.notBefore) {
		defer s.mu.Unlock()
		return s.salt
	}
	if wait := s.asking; wait != nil {
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.salt
	}
	done := make(chan struct{})
	s.asking = done
	s.mu.Unlock()
	salt, err := p.client.AccountSalt(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asking = nil
	close(done)
	if err != nil {
		wait := p.cfg.ProbeInterval
		if api.IsCode(err, api.CodeNotFound) {
			wait = saltRetry // a daemon from before accounts
		}
		s.notBefore = time.Now().Add(wait)
		p.log.Debug("proxy: no account salt from bindery; requests name no account for a while", "err", err, "retry", wait)
		return nil
	}
	s.salt = salt
	return salt
}

// credential picks what identifies the request's account (see above);
// userID is the body's metadata.user_id.
func credential(h http.Header, userID string) (kind, cred string) {
	if k := h.Get("X-Api-Key"); k != "" {
		return "x-api-key", k
	}
	auth := h.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", ""
	}
	if u := metadataAccount(userID); u != "" {
		return "account-uuid", u
	}
	return "bearer", strings.TrimSpace(token)
}

// metadataAccount reads metadata.user_id's account_uuid (Claude Code's
// JSON string; empty when it runs on an API key).
func metadataAccount(userID string) string {
	var v struct {
		Account string `json:"account_uuid"`
	}
	if json.Unmarshal([]byte(userID), &v) != nil {
		return ""
	}
	return hint(v.Account)
}
