package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error codes: the stable "code" of every error answer. A client branches
// on the code, never on the message. The list (status in brackets):
//
//	bad_request           [400] the request is malformed: bad JSON, a missing or invalid field
//	forbidden             [403] the peer's uid is not the daemon's (SO_PEERCRED), or a browser-style request (Origin/Referer set)
//	not_found             [404] unknown path or unknown session id
//	unknown_compile       [404] accept/release of a compile id this bindery never made (or an id of an
//	                            older version, without a seq, that it no longer remembers)
//	compile_forgotten     [404] accept/release of a compile this bindery made and has forgotten: beyond
//	                            the newest --accepted-window accepted compiles of its conversation (its
//	                            accept was recorded when first made) or the newest unaccepted ones of its
//	                            branch (it can no longer be accepted); nothing is recorded
//	unknown_conversation  [404] GET /v1/conversations/{id} of a conversation bindery does not know
//	limit_exceeded        [400] a field over its bound (ids --max-id, sessionFile --max-path, signature
//	                            --max-signature) or more messages than --max-messages; the message names
//	                            the field, its size, the bound and the flag
//	method_not_allowed    [405] the path exists with another method
//	body_timeout          [408] the request body arrived slower than --min-body-rate (after --body-grace)
//	conflict              [409] reserved: the request contradicts recorded state (no endpoint answers it yet)
//	dry_run_compile       [409] accept of a dry-run compile
//	base_unknown          [409] a compile by reference whose base bindery does not hold (never made, another
//	                            conversation's, a dry run, or evicted: bindery holds the newest bases of the
//	                            most recent conversations, and none across a restart); compile in full
//	base_mismatch         [409] a compile by reference whose shared messages are not the base's (the digest
//	                            differs, or the base has fewer messages); compile in full
//	body_too_large        [413] the request body exceeds the daemon's limit (--max-body)
//	unsupported_media     [415] a request body that is not JSON
//	internal              [500] a bug inside bindery; details are in the daemon's log
//	storage_full          [507] the state folder's filesystem is full (SQLITE_FULL, ENOSPC, EDQUOT): the
//	                            message names the folder; nothing of the call was recorded, and bindery
//	                            serves again by itself once space is freed
//	storage_failed        [503] the state folder cannot be written or read (an I/O error, a read-only
//	                            filesystem): the message names the folder and the error
//	unavailable           [503] reserved: bindery cannot serve the request now (no endpoint answers it yet;
//	                            during shutdown new connections are refused and the client reports "not running")
//
// bad_request, body_too_large, internal, unknown_compile, dry_run_compile
// and unknown_conversation are declared with the binding handlers
// (compile.go).
const (
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeUnsupportedMedia = "unsupported_media"
	CodeUnavailable      = "unavailable"
	CodeStorageFull      = "storage_full"
	CodeStorageFailed    = "storage_failed"
)

var codeStatus = map[string]int{
	CodeBadRequest:          http.StatusBadRequest,
	CodeForbidden:           http.StatusForbidden,
	CodeNotFound:            http.StatusNotFound,
	CodeUnknownCompile:      http.StatusNotFound,
	CodeCompileForgotten:    http.StatusNotFound,
	CodeUnknownConversation: http.StatusNotFound,
	CodeDryRunCompile:       http.StatusConflict,
	CodeBaseUnknown:         http.StatusConflict,
	CodeBaseMismatch:        http.StatusConflict,
	CodeMethodNotAllowed:    http.StatusMethodNotAllowed,
	CodeConflict:            http.StatusConflict,
	CodeBodyTooLarge:        http.StatusRequestEntityTooLarge,
	CodeUnsupportedMedia:    http.StatusUnsupportedMediaType,
	CodeInternal:            http.StatusInternalServerError,
	CodeUnavailable:         http.StatusServiceUnavailable,
	CodeLimitExceeded:       http.StatusBadRequest,
	CodeBodyTimeout:         http.StatusRequestTimeout,
	CodeStorageFull:         http.StatusInsufficientStorage,
	CodeStorageFailed:       http.StatusServiceUnavailable,
}

// Error is an error answer, on the server (return one from a Store method
// to choose the code) and on the client (what a non-2xx answer decodes to).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"-"` // the HTTP status (client side: as received)
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf makes an *Error with a code from the list above.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Status: StatusOf(code)}
}

// StatusOf is the HTTP status of a code (500 for an unknown one).
func StatusOf(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// IsCode reports whether err is (or wraps) an *Error with code.
func IsCode(err error, code string) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Code == code
}

type errorBody struct {
	Error *Error `json:"error"`
}

func writeError(w http.ResponseWriter, e *Error) {
	status := e.Status
	if status == 0 {
		status = StatusOf(e.Code)
	}
	writeJSON(w, status, errorBody{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
