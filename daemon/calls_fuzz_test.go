package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// FuzzBindingCalls drives compile, accept and release bodies through the
// real handler, Binder and SQLite database (in process, no socket: a fuzz
// worker runs thousands of calls). Whatever the body, the answer is JSON,
// an error's code is one of api's with its own status, and nothing is
// ever "internal": a malformed or oversized call is the caller's error.
// "$ID" in a body is replaced by a real compile id of conversation "fz".
//
//	go test -run XX -fuzz FuzzBindingCalls -fuzztime 30s ./daemon
func FuzzBindingCalls(f *testing.F) {
	body := string(request("fz", 2, 10))
	for _, s := range []struct {
		path string
		body string
	}{
		{"/v1/compile", `{"conversation":"fz","branch":"main","request":` + body + `}`},
		{"/v1/compile", `{"conversation":"fz","return":"plan","dryRun":true,"request":` + body + `}`},
		{"/v1/compile", `{"conversation":"fz","parent":{"conversation":"p","branch":"b"},"sessionFile":"/x.jsonl","request":{"messages":[]}}`},
		{"/v1/compile", `{"conversation":"","request":{}}`},
		{"/v1/accept", `{"compileId":"$ID","reply":{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}}`},
		{"/v1/accept", `{"compileId":"$ID","inputTransformations":[{"type":"thinking_dropped","path":"messages.1.content.0"}]}`},
		{"/v1/accept", `{"compileId":"c_1_aaaa"}`},
		{"/v1/release", `{"conversation":"fz","compileId":"$ID","path":"messages.1.content.0"}`},
		{"/v1/release", `{"conversation":"fz","signature":"sig-fz-0"}`},
		{"/v1/release", `{"conversation":"fz","signature":"unknown"}`},
	} {
		f.Add(s.path, []byte(s.body))
	}
	e := newBindingEnv(f, nil)
	srv := &api.Server{Binder: e.b, UID: os.Getuid(), Version: "fuzz", MaxBody: 1 << 20,
		Limits: api.Limits{ID: 64, Path: 256, Signature: 1024}}
	h := srv.Handler()
	ctx := api.WithPeer(context.Background(), api.Peer{UID: uint32(os.Getuid())}, nil)
	stampAll(f, e, "fz", []byte(body))
	first, err := e.b.Compile(context.Background(), &api.CompileCall{Conversation: "fz", Branch: "main", Request: []byte(body)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, b []byte) {
		switch path {
		case "/v1/compile", "/v1/accept", "/v1/release":
		default:
			path = "/v1/compile"
		}
		b = bytes.ReplaceAll(b, []byte("$ID"), []byte(first.CompileID))
		req := httptest.NewRequestWithContext(ctx, "POST", "http://bindery"+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		if !json.Valid(out) {
			t.Fatalf("%s %q: answer is not JSON: %d %q", path, b, rec.Code, out)
		}
		if rec.Code == http.StatusOK {
			return
		}
		var eb struct {
			Error api.Error `json:"error"`
		}
		if err := json.Unmarshal(out, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s %q: %d without an error body: %q", path, b, rec.Code, out)
		}
		if api.StatusOf(eb.Error.Code) != rec.Code {
			t.Fatalf("%s %q: code %s answered with status %d", path, b, eb.Error.Code, rec.Code)
		}
		switch eb.Error.Code {
		case api.CodeInternal, api.CodeStorageFailed, api.CodeStorageFull:
			t.Fatalf("%s %q: %d %s: %s", path, b, rec.Code, eb.Error.Code, eb.Error.Message)
		}
		if eb.Error.Code == api.CodeLimitExceeded && !strings.Contains(eb.Error.Message, "--max-") {
			t.Fatalf("limit error without its flag: %s", eb.Error.Message)
		}
	})
}
