package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

// bindery service install --proxy under a real systemd user instance: the
// proxy's unit is written with the listen address and upstream given,
// enabled and started in its sandbox; a request through it reaches the
// upstream and is compiled by the daemon's service; status says where it
// listens; uninstall --proxy undoes it and leaves the daemon running.
func TestServiceInstallProxySystemd(t *testing.T) {
	s := newServiceEnv(t)
	s.startManager()
	up, err := upstreamtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()

	if out, serr, code := s.cli(nil, "service", "install"); code != 0 {
		t.Fatalf("service install: exit %d\n%s%s", code, out, serr)
	}
	out, serr, code := s.cli(nil, "service", "install", "--proxy", "--listen", listen, "--upstream", up.URL)
	if code != 0 {
		t.Fatalf("service install --proxy: exit %d\n%s%s\n%s", code, out, serr, s.systemctl("status", "bindery-proxy"))
	}
	checkWidth(t, "service install --proxy", out)
	for _, want := range []string{
		"wrote    ~/.config/systemd/user/bindery-proxy.service",
		"ran      systemctl --user enable bindery-proxy.service",
		"ANTHROPIC_BASE_URL=http://" + listen,
		"Undo: bindery service uninstall --proxy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("service install --proxy does not say %q:\n%s", want, out)
		}
	}
	unitPath := filepath.Join(s.home, ".config", "systemd", "user", "bindery-proxy.service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), `Environment="BINDERY_PROXY_LISTEN=`+listen+`"`) || !strings.Contains(string(unit), `Environment="BINDERY_UPSTREAM=`+up.URL+`"`) ||
		!strings.Contains(string(unit), "TemporaryFileSystem=%S/bindery:ro") {
		t.Errorf("the unit:\n%s", unit)
	}

	// A request through the proxy's service: answered by the upstream,
	// compiled by the daemon's service.
	body := `{"model":"claude-opus-5-5","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Claude-Code-Session-Id", "svc-probe")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(up.Messages()) != 1 || !bytes.Equal(up.Messages()[0].Body, []byte(body)) {
		t.Fatalf("through the proxy's service: %d %s", resp.StatusCode, b)
	}
	waitFor(t, "the daemon's service to record the proxy's conversation", func() (bool, string) {
		out, _, _ := s.cli(nil, "conversations", "--json")
		var l api.ConversationList
		json.Unmarshal([]byte(out), &l)
		return len(l.Conversations) == 1 && l.Conversations[0].Conversation == "claude-code:svc-probe", out
	})

	out, serr, code = s.cli(nil, "service", "status", "--proxy")
	if code != 0 || !strings.Contains(out, "active, enabled") || !strings.Contains(out, "listens   "+listen) || !strings.Contains(out, "upstream  "+up.URL) {
		t.Errorf("service status --proxy: exit %d\n%s%s", code, out, serr)
	}
	checkWidth(t, "service status --proxy", out)

	out, serr, code = s.cli(nil, "service", "uninstall", "--proxy")
	if code != 0 || !strings.Contains(out, "removed  ~/.config/systemd/user/bindery-proxy.service") {
		t.Errorf("service uninstall --proxy: exit %d\n%s%s", code, out, serr)
	}
	if got := s.systemctl("is-active", "bindery-proxy.service"); got == "active" {
		t.Errorf("the proxy is still active after uninstall")
	}
	if got := s.systemctl("is-active", "bindery.service"); got != "active" {
		t.Errorf("uninstall --proxy stopped the daemon: %s", got)
	}
	if _, serr, code := s.cli(nil, "service", "status", "--proxy"); code != 1 || !strings.Contains(serr, "not installed") {
		t.Errorf("service status --proxy after uninstall: exit %d %s", code, serr)
	}
	// The flags that only the proxy takes are refused without it, and a
	// listen address beyond loopback is refused before anything is written.
	if _, serr, code := s.cli(nil, "service", "install", "--listen", listen); code != 2 || !strings.Contains(serr, "go with --proxy") {
		t.Errorf("--listen without --proxy: exit %d %s", code, serr)
	}
	if _, serr, code := s.cli(nil, "service", "install", "--proxy", "--listen", "0.0.0.0:8787"); code == 0 || !strings.Contains(serr, "loopback") {
		t.Errorf("a public listen address: exit %d %s", code, serr)
	}
	if _, err := os.Stat(unitPath); err == nil {
		t.Error("a refused install wrote the unit")
	}
}
