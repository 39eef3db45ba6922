package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The proxy's own failures answer in the Messages API's error shape
// ({"type":"error","error":{"type":...,"message":...}}), so every client
// reads them as it reads the provider's; the provider's own errors pass
// through unmodified (Claude Code's recovery matches their wording:
// research/gateways.md, 2.3). x-should-retry says whether a retry can help:
// the SDKs and Claude Code otherwise retry every 5xx, ten times by default.

// apiError is one error answer of the proxy's own.
type apiError struct {
	status int
	typ    string // invalid_request_error, request_too_large, overloaded_error, api_error, timeout_error
	msg    string
	retry  bool
}

func (e *apiError) Error() string { return e.msg }

func writeAPIError(w http.ResponseWriter, e *apiError) {
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": e.typ, "message": e.msg}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Should-Retry", strconv.FormatBool(e.retry))
	w.WriteHeader(e.status)
	w.Write(body)
}

// streamError ends an answer whose status is already sent with an error
// event, as the provider ends a stream that fails after its first byte.
func (p *Proxy) streamError(w http.ResponseWriter, rc *http.ResponseController, msg string) {
	data, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": msg}})
	w.Write([]byte("event: error\ndata: "))
	w.Write(data)
	w.Write([]byte("\n\n"))
	rc.Flush()
}
