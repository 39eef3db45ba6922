package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// Account-bound thinking (README "Accounts"; research 1.5 and 3: Sonnet 5.5
// and Haiku 5.5 blocks are read only in the account that minted them). A
// host tells bindery which credential a request goes out under by a
// fingerprint, never by the credential: the HMAC-SHA256 of the credential
// under the store's account salt (GET /v1/account-salt), cut to 128 bits.
// The daemon keeps the fingerprint with the compile and the stamps its
// reply mints, and strips a block of an account-bound model under another
// fingerprint as account-mismatch (not a release).

// AccountFingerprintLen is the length of a fingerprint: 32 lowercase hex
// digits. A compile's account must be exactly this, so a host that passed
// a credential itself by mistake is refused, never stored.
const AccountFingerprintLen = 32

// AccountSalt is the body of GET /v1/account-salt.
type AccountSalt struct {
	Salt string `json:"salt"` // lowercase hex
}

// AccountFingerprint is the fingerprint of credential under salt. kind
// names what the credential is ("x-api-key", "bearer", "account-uuid"), so
// the same string used as two kinds of credential is two accounts. An
// empty credential has no fingerprint ("").
func AccountFingerprint(salt []byte, kind, credential string) string {
	if credential == "" || len(salt) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, salt)
	mac.Write([]byte(kind))
	mac.Write([]byte{0})
	mac.Write([]byte(credential))
	return hex.EncodeToString(mac.Sum(nil)[:AccountFingerprintLen/2])
}

// isAccountFingerprint: exactly AccountFingerprintLen lowercase hex digits.
func isAccountFingerprint(s string) bool {
	if len(s) != AccountFingerprintLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// AccountAlias is the body of POST /v1/account-alias: Fingerprint (a
// credential's) belongs to Account (its organization's fingerprint, made
// from the provider's anthropic-organization-id with kind "organization").
// Two keys of one organization are then one account. The first alias of
// a fingerprint stays.
type AccountAlias struct {
	Fingerprint string `json:"fingerprint"`
	Account     string `json:"account"`
}

// AccountAliasAnswer answers an alias: Added is false when the fingerprint
// had one already; Account is the account it aliases now.
type AccountAliasAnswer struct {
	Added   bool   `json:"added"`
	Account string `json:"account"`
}

// AccountAlias is POST /v1/account-alias.
func (c *Client) AccountAlias(ctx context.Context, alias AccountAlias) (*AccountAliasAnswer, error) {
	var a AccountAliasAnswer
	if err := c.Do(ctx, http.MethodPost, "/v1/account-alias", alias, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func (s *Server) handleAccountAlias(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var a AccountAlias
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		writeError(w, Errorf(CodeBadRequest, "account-alias: the body is not an alias: %v", err))
		return
	}
	switch {
	case !isAccountFingerprint(a.Fingerprint) || !isAccountFingerprint(a.Account):
		writeError(w, Errorf(CodeBadRequest, "account-alias: fingerprint and account must be fingerprints (%d lowercase hex digits, api.AccountFingerprint); never send a credential", AccountFingerprintLen))
		return
	case a.Fingerprint == a.Account:
		writeError(w, Errorf(CodeBadRequest, "account-alias: a fingerprint cannot alias itself"))
		return
	}
	ans, err := s.Binder.AccountAlias(r.Context(), a)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// AccountSalt is GET /v1/account-salt: the salt to make fingerprints with.
// It is the same for every host of one store, and for good.
func (c *Client) AccountSalt(ctx context.Context) ([]byte, error) {
	var s AccountSalt
	if err := c.Do(ctx, http.MethodGet, "/v1/account-salt", nil, &s); err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(s.Salt)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("GET /v1/account-salt: the salt is not hex")
	}
	return b, nil
}

func (s *Server) handleAccountSalt(w http.ResponseWriter, r *http.Request) {
	salt, err := s.Binder.AccountSalt(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AccountSalt{Salt: hex.EncodeToString(salt)})
}
