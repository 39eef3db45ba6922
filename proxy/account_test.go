package proxy

import (
	"net/http"
	"testing"
)

func TestCredential(t *testing.T) {
	claudeCode := func(account string) []byte {
		return []byte(`{"model":"m","metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"` + account + `\",\"session_id\":\"s\"}"},"messages":[]}`)
	}
	cases := []struct {
		name       string
		h          http.Header
		body       []byte
		kind, cred string
	}{
		{"api key", http.Header{"X-Api-Key": {"sk-1"}}, claudeCode("acct-1"), "x-api-key", "sk-1"},
		{"api key before bearer", http.Header{"X-Api-Key": {"sk-1"}, "Authorization": {"Bearer tok"}}, nil, "x-api-key", "sk-1"},
		{"oauth login names its account", http.Header{"Authorization": {"Bearer tok-a"}}, claudeCode("acct-1"), "account-uuid", "acct-1"},
		{"bearer without account", http.Header{"Authorization": {"Bearer tok-a"}}, claudeCode(""), "bearer", "tok-a"},
		{"bearer, no metadata", http.Header{"Authorization": {"bearer  tok-b "}}, []byte(`{"messages":[]}`), "bearer", "tok-b"},
		{"basic auth is not a credential bindery reads", http.Header{"Authorization": {"Basic eDp5"}}, nil, "", ""},
		{"none", http.Header{}, claudeCode("acct-1"), "", ""},
		{"empty bearer", http.Header{"Authorization": {"Bearer  "}}, nil, "", ""},
	}
	for _, c := range cases {
		rb, _ := readRequestBody(c.body)
		kind, cred := credential(c.h, rb.userID)
		if kind != c.kind || cred != c.cred {
			t.Errorf("%s: got %q %q, want %q %q", c.name, kind, cred, c.kind, c.cred)
		}
	}
}
