package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// stream is a provider's event stream for one reply: a thinking block, a
// tool call whose input arrives in pieces, usage and transformations.
const replyStream = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":7},\"input_transformations\":[{\"type\":\"thinking_dropped\",\"path\":\"messages.1.content.0\",\"reason\":\"prefix_binding_mismatch\"}]}}\r\n\r\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"le\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"t me\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"SIG\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"read\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a.\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"go\\\", \\\"n\\\": 1.50}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":42}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestReplyAnyChunking: the reply assembled from the stream is the same
// however the bytes arrive, one at a time included.
func TestReplyAnyChunking(t *testing.T) {
	want := `{"content":[{"signature":"SIG","thinking":"let me","type":"thinking"},{"id":"t1","input":{"n":1.50,"path":"a.go"},"name":"read","type":"tool_use"}],"role":"assistant"}`
	for _, size := range []int{1, 2, 7, 64, len(replyStream)} {
		rp := newReply(1 << 20)
		ev := &events{max: 1 << 20, on: rp.event}
		for i := 0; i < len(replyStream); i += size {
			ev.write([]byte(replyStream[i:min(i+size, len(replyStream))]))
		}
		if !rp.complete() {
			t.Fatalf("chunks of %d: not complete: %v", size, rp.failed)
		}
		call, err := rp.accept("c_1")
		if err != nil {
			t.Fatal(err)
		}
		if string(call.Reply) != want {
			t.Errorf("chunks of %d: reply %s\nwant %s", size, call.Reply, want)
		}
		var u map[string]any
		json.Unmarshal(call.Usage, &u)
		if u["input_tokens"] != float64(10) || u["output_tokens"] != float64(42) || u["cache_read_input_tokens"] != float64(7) {
			t.Errorf("usage %s", call.Usage)
		}
		if len(call.InputTransformations) != 1 || call.InputTransformations[0].Path != "messages.1.content.0" {
			t.Errorf("transformations %+v", call.InputTransformations)
		}
	}
}

// TestReplyIncomplete: a stream cut before message_stop, one with an
// error event, malformed data and a reply over its bound are never
// complete.
func TestReplyIncomplete(t *testing.T) {
	cut := replyStream[:strings.Index(replyStream, "event: message_stop")]
	withError := cut + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n" + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	malformed := strings.Replace(replyStream, `"index":1,"delta"`, `"index":1,"delta":`, 1)
	for name, c := range map[string]struct {
		s   string
		max int
	}{"cut": {cut, 1 << 20}, "error event": {withError, 1 << 20}, "malformed": {malformed, 1 << 20}, "over the bound": {replyStream, 100}} {
		rp := newReply(c.max)
		ev := &events{max: 1 << 20, on: rp.event}
		ev.write([]byte(c.s))
		if rp.complete() {
			t.Errorf("%s: complete", name)
		}
	}
	rp := newReply(1 << 20)
	ev := &events{max: 64, on: rp.event}
	ev.write([]byte(replyStream))
	if ev.err == nil {
		t.Error("a line over the events' bound was read")
	}
}

// BenchmarkSideCopy: what the side copy costs a long reply's stream (4 MB
// of text in 4 KB deltas, read 64 KB at a time as the stream loop reads
// it): splitting the events and gathering the deltas, against copying the
// same bytes once, in one run.
func BenchmarkSideCopy(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":10}}}\n\n")
	sb.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	delta, _ := json.Marshal(strings.Repeat("All work and no play makes a long reply. ", 100)[:4096])
	for range 1024 {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":" + string(delta) + "}}\n\n")
	}
	sb.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	stream := []byte(sb.String())
	dst := make([]byte, 64<<10)
	var parse, copying time.Duration
	for b.Loop() {
		t0 := time.Now()
		rp := newReply(32 << 20)
		ev := &events{max: 32 << 20, on: rp.event}
		for i := 0; i < len(stream); i += 64 << 10 {
			ev.write(stream[i:min(i+64<<10, len(stream))])
		}
		if !rp.complete() {
			b.Fatal(rp.failed)
		}
		t1 := time.Now()
		for i := 0; i < len(stream); i += 64 << 10 {
			copy(dst, stream[i:min(i+64<<10, len(stream))])
		}
		t2 := time.Now()
		parse, copying = parse+t1.Sub(t0), copying+t2.Sub(t1)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportMetric(float64(parse.Microseconds())/float64(b.N), "side-copy-µs")
	b.ReportMetric(float64(copying.Microseconds())/float64(b.N), "copy-µs")
	b.ReportMetric(float64(parse)/float64(copying), "side-copy/copy")
}
