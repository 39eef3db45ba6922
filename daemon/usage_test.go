package daemon

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestReplyUsage(t *testing.T) {
	show := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	cases := []struct {
		name, usage, reply string
		ok                 bool
		want               string // input output read write write1h
	}{
		{"streamed", `{"input_tokens":12,"output_tokens":30,"cache_read_input_tokens":4000,"cache_creation_input_tokens":500,"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":300}}`, "", true, "12 30 4000 500 300"},
		{"breakdown only", `{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":6}}`, "", true, "1 2 0 11 6"},
		{"whole response as the reply", "", `{"type":"message","role":"assistant","content":[],"usage":{"input_tokens":7,"output_tokens":8,"cache_read_input_tokens":9,"cache_creation_input_tokens":10}}`, true, "7 8 9 10 -"},
		{"the call's usage wins", `{"input_tokens":1}`, `{"usage":{"input_tokens":7}}`, true, "1 - - - -"},
		{"no usage", "", `{"role":"assistant","content":[]}`, false, "- - - - -"},
		{"null", "null", "", false, "- - - - -"},
		{"not an object", `[1,2]`, "", true, "- - - - -"},
		{"wrong types and bounds", `{"input_tokens":"12","output_tokens":-1,"cache_read_input_tokens":1.5,"cache_creation_input_tokens":1e13}`, "", true, "- - - - -"},
		{"largest count", `{"input_tokens":1000000000000}`, "", true, "1000000000000 - - - -"},
	}
	for _, c := range cases {
		u, ok := replyUsage(json.RawMessage(c.usage), json.RawMessage(c.reply))
		got := fmt.Sprintf("%s %s %s %s %s", show(u.Input), show(u.Output), show(u.CacheRead), show(u.CacheWrite), show(u.CacheWrite1h))
		if ok != c.ok || got != c.want {
			t.Errorf("%s: ok %v %q, want %v %q", c.name, ok, got, c.ok, c.want)
		}
	}
}
