package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Which conversation a request belongs to.
//
// No session file exists for the hosts the proxy serves, and one session
// id carries several histories: Claude Code's subagents, its title and
// compaction calls, a resumed session; opencode's title call on another
// model. bindery's rule, in two parts:
//
//   - The conversation is the client's session: the client's name and its
//     session hint (Claude Code's X-Claude-Code-Session-Id, else the
//     session_id in metadata.user_id; opencode's x-session-id; any client's
//     metadata.user_id session), e.g. "claude-code:4f0c…". A request with no
//     hint belongs to its client's one conversation ("anthropic-sdk").
//     Engagement is the conversation's, so once a session has had a reply
//     accepted, every thinking block any of its histories replays is judged
//     by its stamp.
//   - The branch is one history of that session: the agent that sends it
//     (Claude Code's X-Claude-Code-Agent-Id, else "main") and the value of
//     its first message, e.g. "main/9a1f03c2b7e4". Every request of a
//     history begins with the same first message, and two histories almost
//     never do; the value is taken without cache_control markers and with
//     string content read as one text block, because clients move the
//     cache breakpoint and flip a message between the two forms from turn to
//     turn (research/gateways.md, 2.3). Releases are per branch, so a
//     subagent's edits never strip the main history's blocks.
//
// What makes this safe whatever the grouping: a thinking block's validity
// is decided by its stamp (the prefix it was minted under, recorded
// globally by signature), never by the conversation's name. A wrong
// grouping can only cost a block (a release another history made, a
// compile by reference that misses), never send one the provider refuses.
// Hints are the client's text: one that is empty, longer than maxHint or
// holds anything but visible ASCII is not used.

// maxHint bounds a session or agent hint's length.
const maxHint = 128

// ident names a request's conversation and branch.
type ident struct {
	client       string
	conversation string
	branch       string
	account      string // the credential's fingerprint (account.go); "" none
}

// identify reads the request's hints and its first message (its key from
// keys, when not nil).
func identify(h http.Header, body []byte, rb requestBody, keys *historyKeys) ident {
	els := rb.els
	client := clientName(h)
	session := hint(h.Get("X-Claude-Code-Session-Id"))
	if session != "" {
		client = "claude-code"
	}
	if session == "" {
		session = hint(h.Get("X-Session-Id"))
	}
	if session == "" {
		session = metadataSession(rb.userID)
	}
	id := ident{client: client, conversation: client}
	if session != "" {
		id.conversation = client + ":" + session
	}
	agent := hint(h.Get("X-Claude-Code-Agent-Id"))
	if agent == "" {
		agent = "main"
	}
	id.branch = agent
	if len(els) > 0 {
		id.branch += "/" + keys.of(body[els[0].start:els[0].end])
	}
	return id
}

// clientName is the first product of the User-Agent, lowercased, with the
// names users know: claude-cli is Claude Code, the SDKs' "Anthropic/JS" is
// anthropic-sdk.
func clientName(h http.Header) string {
	ua := h.Get("User-Agent")
	prod, _, _ := strings.Cut(ua, "/")
	prod = strings.ToLower(strings.TrimSpace(prod))
	switch {
	case prod == "claude-cli" || h.Get("X-Claude-Code-Session-Id") != "":
		return "claude-code"
	case prod == "opencode":
		return "opencode"
	case prod == "anthropic" || strings.HasPrefix(prod, "anthropic"):
		return "anthropic-sdk"
	}
	if prod = hint(prod); prod == "" || strings.ContainsAny(prod, ":/") {
		return "client"
	}
	return prod
}

// hint is s when it is usable as part of an id: 1 to maxHint visible ASCII
// characters, none of them a space.
func hint(s string) string {
	if s == "" || len(s) > maxHint {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return ""
		}
	}
	return s
}

// metadataSession reads metadata.user_id's session: Claude Code's JSON
// string {"device_id":…,"session_id":…}, or its older
// "user_<hash>_account__session_<uuid>".
func metadataSession(userID string) string {
	var v struct {
		Session string `json:"session_id"`
	}
	if json.Unmarshal([]byte(userID), &v) == nil && v.Session != "" {
		return hint(v.Session)
	}
	if _, after, ok := strings.Cut(userID, "_session_"); ok {
		return hint(after)
	}
	return ""
}

// historyKeys remembers the keys of the first messages it was asked for:
// a history sends the same first message on every turn, and reading it as
// JSON to take its key cost 70 µs of a 10 KB request's path. A first
// message over maxKeyed bytes is read every time; the memory is bounded by
// keyedBytes, and starts empty again when full.
type historyKeys struct {
	mu    sync.Mutex
	keys  map[string]string
	bytes int
}

const (
	maxKeyed   = 64 << 10
	keyedBytes = 4 << 20
)

// of is historyKey(msg), remembered.
func (k *historyKeys) of(msg []byte) string {
	if k == nil || len(msg) > maxKeyed {
		return historyKey(msg)
	}
	k.mu.Lock()
	key, ok := k.keys[string(msg)]
	k.mu.Unlock()
	if ok {
		return key
	}
	key = historyKey(msg)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil || k.bytes+len(msg) > keyedBytes {
		k.keys, k.bytes = map[string]string{}, 0
	}
	k.keys[string(msg)] = key
	k.bytes += len(msg) + len(key)
	return key
}

// historyKey is 12 hex digits of the SHA-256 of a message's value with
// cache_control markers removed and string content read as one text
// block. It names a history, nothing more: no block is judged by it.
func historyKey(msg []byte) string {
	var m map[string]any
	if decodeNumbers(msg, &m) != nil {
		sum := sha256.Sum256(msg)
		return hex.EncodeToString(sum[:6])
	}
	switch c := m["content"].(type) {
	case string:
		m["content"] = []any{map[string]any{"type": "text", "text": c}}
	case []any:
		for _, b := range c {
			if o, ok := b.(map[string]any); ok {
				delete(o, "cache_control")
			}
		}
	}
	enc, err := marshal(m)
	if err != nil {
		enc = bytes.Clone(msg)
	}
	sum := sha256.Sum256(enc)
	return hex.EncodeToString(sum[:6])
}
