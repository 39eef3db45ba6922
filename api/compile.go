package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Error codes of the binding endpoints (the full list is in errors.go).
const (
	CodeBadRequest          = "bad_request"
	CodeBodyTooLarge        = "body_too_large"
	CodeUnknownCompile      = "unknown_compile"
	CodeCompileForgotten    = "compile_forgotten"
	CodeDryRunCompile       = "dry_run_compile"
	CodeUnknownConversation = "unknown_conversation"
	CodeInternal            = "internal"
	// CodeBaseUnknown and CodeBaseMismatch refuse a compile by reference
	// (CompileBase); the host answers either with a full compile.
	CodeBaseUnknown  = "base_unknown"
	CodeBaseMismatch = "base_mismatch"
)

// DefaultMaxBody bounds a request body: the provider's own request limit
// is 32 MB, and a compile wraps the request with a few small fields, so
// the default leaves room above it.
const DefaultMaxBody = 64 << 20

// Return values of CompileCall.Return.
const (
	ReturnRequest = "request"
	ReturnPlan    = "plan"
)

// CompileCall is the body of POST /v1/compile (api.md).
type CompileCall struct {
	Conversation  string     `json:"conversation"`
	Branch        string     `json:"branch,omitempty"`
	SessionFile   string     `json:"sessionFile,omitempty"`
	Parent        *BranchRef `json:"parent,omitempty"`
	BindsThinking *bool      `json:"bindsThinking,omitempty"`
	DryRun        bool       `json:"dryRun,omitempty"`
	Return        string     `json:"return,omitempty"`
	// Account is the fingerprint of the credential the request goes out
	// under (AccountFingerprint); "" when the host does not say (account.go).
	Account string `json:"account,omitempty"`
	// Base makes this a compile by reference: Request's messages are only
	// those after the ones it shares with the base compile's request.
	Base *CompileBase `json:"base,omitempty"`
	// Request is the Anthropic request body exactly as the host gave it:
	// a subslice of the call's body, never re-encoded.
	Request json.RawMessage `json:"request"`
}

// CompileBase names the compile a request extends (api/doc.go, "Compile
// by reference"): the host sends only the messages after the Messages it
// shares with that compile's request, and proves they are shared by their
// digest, which bindery checks against the bytes it holds; it never takes
// the host's word.
type CompileBase struct {
	CompileID string `json:"compileId"`
	// Messages is how many of the base request's messages this request
	// begins with (at least 1).
	Messages int `json:"messages"`
	// Digest is the lowercase hex SHA-256 of those messages' bytes as the
	// base request carried them: from the first message's first byte to
	// the last one's last, the separators between them included. A host
	// that serializes with JSON.stringify hashes
	// JSON.stringify(messages.slice(0, n)) without its brackets: the
	// strings of the messages joined with ",".
	Digest string `json:"digest"`
}

// BranchRef names a branch of a conversation.
type BranchRef struct {
	Conversation string `json:"conversation"`
	Branch       string `json:"branch,omitempty"`
}

// Strip is one thinking block the compile removed.
type Strip struct {
	Path   string `json:"path"` // messages.N.content.M in the request as the host gave it
	Reason string `json:"reason"`
	Tokens int    `json:"tokens"`
}

// CacheChange says where this compile's request first differs from the
// branch's last accepted request, and who changed it.
type CacheChange struct {
	FirstChange string `json:"firstChange,omitempty"`
	Cause       string `json:"cause"` // host, bindery or none
}

// CompilePlan is the answer to a compile without the rewritten request.
type CompilePlan struct {
	CompileID string `json:"compileId"`
	// Bound is false for a body that is not an Anthropic Messages request
	// (no messages array, or another API's body: README "What bindery
	// compiles"); the request then comes back byte for byte, nothing is
	// recorded, and NotMessages says what made it another API's.
	Bound            bool        `json:"bound"`
	NotMessages      string      `json:"notMessages,omitempty"`
	Engaged          bool        `json:"engaged"`
	DryRun           bool        `json:"dryRun,omitempty"`
	ThinkingStripped int         `json:"thinkingStripped"`
	ThinkingKept     int         `json:"thinkingKept"` // thinking blocks sent on, as the request carried them
	Strips           []Strip     `json:"strips"`
	DroppedMessages  []string    `json:"droppedMessages"`
	Cache            CacheChange `json:"cache"`
}

// CompileAnswer is the plan plus, when asked, the rewritten request
// (raw bytes: the original with the stripped spans cut).
type CompileAnswer struct {
	CompilePlan
	Request json.RawMessage `json:"request,omitempty"`
}

// AcceptCall is the body of POST /v1/accept.
type AcceptCall struct {
	CompileID            string                `json:"compileId"`
	Reply                json.RawMessage       `json:"reply,omitempty"`
	InputTransformations []InputTransformation `json:"inputTransformations,omitempty"`
	Usage                json.RawMessage       `json:"usage,omitempty"`
}

// InputTransformation is one entry of the response's input_transformations.
type InputTransformation struct {
	Type   string `json:"type"`
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AcceptAnswer answers an accept. Repeated is true when the compile was
// already accepted: nothing was recorded twice. A repeat is recognized for
// the newest --accepted-window accepted compiles of a conversation; an
// older one answers 404 compile_forgotten (README "Limits", Retention).
type AcceptAnswer struct {
	Accepted bool `json:"accepted"`
	Stamped  int  `json:"stamped"`
	Released int  `json:"released"`
	Repeated bool `json:"repeated,omitempty"`
}

// ReleaseCall is the body of POST /v1/release: either a compile and a path
// in its request as sent, or a signature on every branch.
type ReleaseCall struct {
	Conversation string `json:"conversation"`
	Branch       string `json:"branch,omitempty"`
	CompileID    string `json:"compileId,omitempty"`
	Path         string `json:"path,omitempty"`
	Signature    string `json:"signature,omitempty"`
}

// ReleaseAnswer answers a release: Released counts the releases recorded
// now (a block already released counts 0). Reason says why nothing was
// released when that is not obvious (a signature bindery never saw).
type ReleaseAnswer struct {
	Released int    `json:"released"`
	Reason   string `json:"reason,omitempty"`
}

// ConversationState is GET /v1/conversations/{id}.
type ConversationState struct {
	Conversation string        `json:"conversation"`
	Engaged      bool          `json:"engaged"`
	SessionFile  string        `json:"sessionFile,omitempty"`
	Parent       *BranchRef    `json:"parent,omitempty"`
	Branches     []BranchState `json:"branches"`
	Stamps       int           `json:"stamps"`
	StampsLinked int           `json:"stampsLinked"` // stamps whose reply bindery has seen land in the session file
	Releases     []ReleaseInfo `json:"releases"`
	Compiles     int           `json:"compiles"` // remembered compile records
	// SessionTree is true for a pi session bindery has ingested: Branches
	// are then the session tree's branches (its leaves, in file order), a
	// branch being identified by its path (design/binding.md): a compile
	// made at any entry on a leaf's path is on that branch. Compiles that
	// named an entry the session file does not show (yet) are listed after
	// them, one row per name, with NotInTree set.
	SessionTree bool `json:"sessionTree,omitempty"`
	// CompileLeaves (pi only) is the raw bookkeeping per leaf a compile
	// named, one row per name as Branches lists a non-pi conversation's
	// branches: these are positions on branches, not branches.
	CompileLeaves []BranchState `json:"compileLeaves,omitempty"`
}

// BranchState is one branch of a conversation. For a pi session
// (ConversationState.SessionTree) Branch is a leaf of the session tree and
// the counts cover every compile made at an entry on its path: Owner is
// the last accepted of them, Releases counts the releases a compile at the
// leaf applies (those made on the path, those that reach it from another
// branch by the fork rule, and releases by signature; a parent session's
// inherited releases are not counted here), Stamps the stamps minted by
// the compiles on the path.
type BranchState struct {
	Branch     string     `json:"branch"`
	Owner      string     `json:"owner,omitempty"` // last accepted compile
	Parent     *BranchRef `json:"parent,omitempty"`
	Unaccepted int        `json:"unaccepted"` // remembered compiles not yet accepted
	Accepted   int        `json:"accepted"`
	Releases   int        `json:"releases"`
	Stamps     int        `json:"stamps"` // stamps minted by this branch's accepts
	// pi only: pi's current leaf, the entries on the path root..leaf, and
	// NotInTree for a leaf compiles named that the session file does not
	// show (not written or not ingested yet, or not an entry id).
	Current   bool `json:"current,omitempty"`
	Entries   int  `json:"entries,omitempty"`
	NotInTree bool `json:"notInTree,omitempty"`
}

// ConversationList is GET /v1/conversations: the conversations no pi
// session file names (bindery proxy's, any host's own), the most recently
// active first, at most 1,000. pi's sessions are GET /v1/sessions.
type ConversationList struct {
	Conversations []ConversationSummary `json:"conversations"`
}

// ConversationSummary is one conversation of a ConversationList.
type ConversationSummary struct {
	Conversation string `json:"conversation"`
	// Client is the conversation id's part before its first ':' when it
	// has one: bindery proxy names its conversations client:session
	// (claude-code:…, opencode:…), or the client alone without a session.
	Client       string `json:"client,omitempty"`
	Engaged      bool   `json:"engaged"`
	Created      string `json:"created"`
	LastActivity string `json:"lastActivity"`
	Branches     int    `json:"branches"`
	Compiles     int    `json:"compiles"` // remembered compile records
	Accepted     int    `json:"accepted"`
	Stamps       int    `json:"stamps"`
	Releases     int    `json:"releases"`
	// Retries: releases after a provider refusal (bindery proxy's release,
	// recompile and retry), a part of Releases.
	Retries int `json:"retries"`
	// Replies accepted with a usage, and their tokens (the report prices
	// them: bindery report).
	Replies    int   `json:"replies"`
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
}

// ReleaseInfo is one release.
type ReleaseInfo struct {
	Branch    string `json:"branch"`
	Block     string `json:"block"` // hex digest of the signature (or redacted data)
	Reason    string `json:"reason"`
	CompileID string `json:"compileId,omitempty"`
	Time      string `json:"time"`
}

// Binder decides compiles and records accepts and releases; the daemon
// implements it. Errors that are the caller's fault are *Error (their code
// chooses the status); anything else answers 500 internal.
type Binder interface {
	Compile(ctx context.Context, call *CompileCall) (*CompileAnswer, error)
	Accept(ctx context.Context, call *AcceptCall) (*AcceptAnswer, error)
	Release(ctx context.Context, call *ReleaseCall) (*ReleaseAnswer, error)
	Conversation(ctx context.Context, id string) (*ConversationState, error)
	// Conversations lists the conversations no pi session file names
	// (bindery proxy's, any host's own), the most recently active first.
	Conversations(ctx context.Context) (*ConversationList, error)
	// AccountSalt is the store's account fingerprint salt (account.go).
	AccountSalt(ctx context.Context) ([]byte, error)
	// AccountAlias records that a fingerprint belongs to an account.
	AccountAlias(ctx context.Context, a AccountAlias) (*AccountAliasAnswer, error)
}

// readBody reads the whole body within the limit. Content-Length, when
// given, sizes the buffer once and refuses an oversized body unread.
// Handler has already refused a Content-Length over the limit and wrapped
// the body in a MaxBytesReader.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			writeError(w, Errorf(CodeUnsupportedMedia, "the body must be application/json, not %q", ct))
			return nil, false
		}
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= s.MaxBody {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		if e := bodyError(err); e != nil {
			writeError(w, e)
		} else {
			writeError(w, Errorf(CodeBadRequest, "reading the request body: %v", err))
		}
		return nil, false
	}
	if buf.Len() == 0 {
		writeError(w, Errorf(CodeBadRequest, "empty request body"))
		return nil, false
	}
	return buf.Bytes(), true
}

// isSHA256Hex: 64 lowercase hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// decodeCompile splits the body once: the request's bytes are kept as a
// subslice, the small fields are decoded on their own.
func decodeCompile(body []byte) (*CompileCall, error) {
	var c CompileCall
	seenRequest := false
	err := splitObject(body, func(key string, val []byte) error {
		var err error
		switch key {
		case "request":
			c.Request = val
			seenRequest = true
		case "conversation":
			err = json.Unmarshal(val, &c.Conversation)
		case "branch":
			err = json.Unmarshal(val, &c.Branch)
		case "sessionFile":
			err = json.Unmarshal(val, &c.SessionFile)
		case "parent":
			err = json.Unmarshal(val, &c.Parent)
		case "bindsThinking":
			err = json.Unmarshal(val, &c.BindsThinking)
		case "dryRun":
			err = json.Unmarshal(val, &c.DryRun)
		case "return":
			err = json.Unmarshal(val, &c.Return)
		case "account":
			err = json.Unmarshal(val, &c.Account)
		case "base":
			err = json.Unmarshal(val, &c.Base)
		default:
			// unknown fields are allowed (forward compatibility) but must be JSON
			if !json.Valid(val) {
				err = errors.New("not valid JSON")
			}
		}
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c.Conversation == "" {
		return nil, errors.New(`"conversation" is required`)
	}
	if !seenRequest {
		return nil, errors.New(`"request" is required`)
	}
	switch c.Return {
	case "":
		c.Return = ReturnRequest
	case ReturnRequest, ReturnPlan:
	default:
		return nil, fmt.Errorf(`"return" is %q: want "request" or "plan"`, c.Return)
	}
	if c.Account != "" && !isAccountFingerprint(c.Account) {
		// Never echo it: a host that got this wrong may have sent the
		// credential itself.
		return nil, fmt.Errorf(`"account" is not a fingerprint (%d lowercase hex digits, api.AccountFingerprint); never send the credential itself`, AccountFingerprintLen)
	}
	if b := c.Base; b != nil {
		switch {
		case b.CompileID == "":
			return nil, errors.New(`"base.compileId" is required`)
		case b.Messages < 1:
			return nil, fmt.Errorf(`"base.messages" is %d: want at least 1 (a request that shares nothing is a full compile)`, b.Messages)
		case !isSHA256Hex(b.Digest):
			return nil, errors.New(`"base.digest" is not a lowercase hex SHA-256 (64 characters)`)
		}
	}
	return &c, nil
}

func (s *Server) handleCompile(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	call, err := decodeCompile(body)
	if err != nil {
		writeError(w, &Error{Code: CodeBadRequest, Message: "compile: " + err.Error(), Status: StatusOf(CodeBadRequest)})
		return
	}
	if e := s.Limits.checkCompile(call); e != nil {
		writeError(w, e)
		return
	}
	ans, err := s.Binder.Compile(r.Context(), call)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if call.Return == ReturnPlan {
		ans.Request = nil
	}
	writeCompileAnswer(w, ans)
}

// writeCompileAnswer writes the plan with encoding/json and then the
// rewritten request verbatim: a megabyte of request is copied once into
// the socket, never re-encoded or re-validated.
func writeCompileAnswer(w http.ResponseWriter, ans *CompileAnswer) {
	plan, err := json.Marshal(&ans.CompilePlan)
	if err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"encoding the plan"}}`, http.StatusInternalServerError)
		return
	}
	size := len(plan) + 1
	if ans.Request != nil {
		size += len(`,"request":`) + len(ans.Request)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(http.StatusOK)
	if ans.Request == nil {
		w.Write(plan)
		w.Write([]byte{'\n'})
		return
	}
	w.Write(plan[:len(plan)-1])
	w.Write([]byte(`,"request":`))
	w.Write(ans.Request)
	w.Write([]byte("}\n"))
}

func (s *Server) handleAccept(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var call AcceptCall
	if err := json.Unmarshal(body, &call); err != nil {
		writeError(w, &Error{Code: CodeBadRequest, Message: "accept: " + err.Error(), Status: StatusOf(CodeBadRequest)})
		return
	}
	if call.CompileID == "" {
		writeError(w, &Error{Code: CodeBadRequest, Message: `accept: "compileId" is required`, Status: StatusOf(CodeBadRequest)})
		return
	}
	if e := s.Limits.checkAccept(&call); e != nil {
		writeError(w, e)
		return
	}
	ans, err := s.Binder.Accept(r.Context(), &call)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var call ReleaseCall
	if err := json.Unmarshal(body, &call); err != nil {
		writeError(w, &Error{Code: CodeBadRequest, Message: "release: " + err.Error(), Status: StatusOf(CodeBadRequest)})
		return
	}
	switch {
	case call.Conversation == "":
		writeError(w, &Error{Code: CodeBadRequest, Message: `release: "conversation" is required`, Status: StatusOf(CodeBadRequest)})
		return
	case call.Signature == "" && (call.CompileID == "" || call.Path == ""):
		writeError(w, &Error{Code: CodeBadRequest, Message: `release: give "compileId" and "path", or "signature"`, Status: StatusOf(CodeBadRequest)})
		return
	}
	if e := s.Limits.checkRelease(&call); e != nil {
		writeError(w, e)
		return
	}
	ans, err := s.Binder.Release(r.Context(), &call)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

func (s *Server) handleConversations(w http.ResponseWriter, r *http.Request) {
	l, err := s.Binder.Conversations(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) handleConversation(w http.ResponseWriter, r *http.Request) {
	if e := checkLen("conversation", "id", r.PathValue("id"), s.Limits.ID, "--max-id"); e != nil {
		writeError(w, e)
		return
	}
	st, err := s.Binder.Conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
