// A tool loop driven by the real @anthropic-ai/sdk against
// ANTHROPIC_BASE_URL (bindery proxy in the tests), with a pruner that
// clears the oldest tool result before turn PRUNE_AT, as context pruners
// and Claude Code's microcompaction do. Streams every turn with the SDK's
// own accumulator (messages.stream().finalMessage()) and replays the
// assistant content exactly as the SDK returned it. Prints one JSON line
// per request: {"turn":N,"status":200,"thinking":K} or the error.
import Anthropic from "@anthropic-ai/sdk";

const turns = Number(process.env.TURNS ?? 8);
const pruneAt = Number(process.env.PRUNE_AT ?? 4);
const client = new Anthropic({ maxRetries: 0 });
const tools = [{ name: "read", description: "Read a file.", input_schema: { type: "object", properties: { path: { type: "string" } } } }];
const messages = [{ role: "user", content: "Fix the parser, reading what you need." }];

for (let turn = 1; turn <= turns; turn++) {
  if (turn === pruneAt) {
    for (const m of messages) {
      if (m.role !== "user" || !Array.isArray(m.content)) continue;
      const i = m.content.findIndex((b) => b.type === "tool_result");
      if (i >= 0) {
        m.content[i] = { ...m.content[i], content: "[Old tool result content cleared]" };
        break;
      }
    }
  }
  let msg;
  try {
    msg = await client.messages
      .stream({ model: process.env.MODEL ?? "claude-opus-5-5", max_tokens: 32000, thinking: { type: "adaptive" }, system: "You are a careful coding agent.", tools, messages })
      .finalMessage();
  } catch (err) {
    console.log(JSON.stringify({ turn, status: err.status ?? 0, error: String(err.message ?? err) }));
    process.exit(1);
  }
  const thinking = msg.content.filter((b) => b.type === "thinking" || b.type === "redacted_thinking").length;
  console.log(JSON.stringify({ turn, status: 200, thinking, stop: msg.stop_reason }));
  messages.push({ role: "assistant", content: msg.content });
  const call = msg.content.find((b) => b.type === "tool_use");
  if (call) messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: `// contents of ${call.input.path}` }] });
  else messages.push({ role: "user", content: `Next step ${turn}.` });
}
