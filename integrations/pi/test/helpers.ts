import type { PiContext, PiModel } from "../src/pi-types.js";
import type { Reporter } from "../src/bridge.js";

/** A PiContext with pi's shapes, recording what the extension shows. */
export class FakeCtx implements PiContext {
  hasUI = true;
  signal: AbortSignal | undefined = undefined;
  cwd = "/tmp";
  statuses: (string | undefined)[] = [];
  notes: { message: string; type?: string }[] = [];
  sessionId = "sess-1";
  leaf: string | null = "leaf-1";
  file: string | undefined = "/tmp/sessions/s.jsonl";
  model: PiModel | undefined = { id: "claude-fable-5-2", api: "anthropic-messages", provider: "anthropic", baseUrl: "https://api.anthropic.com" };
  ui = {
    notify: (message: string, type?: "info" | "warning" | "error") => void this.notes.push({ message, type }),
    setStatus: (_key: string, text: string | undefined) => void this.statuses.push(text),
  };
  entries: { type: string; customType?: string; data?: unknown }[] = [];
  /** Ids from the root to the leaf, as pi's getBranch() returns entries. */
  branchPath: string[] = [];
  sessionManager = {
    getBranch: () => this.branchPath.map((id) => ({ id })),
    getEntries: () => this.entries,
    getSessionId: () => this.sessionId,
    getLeafId: () => this.leaf,
    getSessionFile: () => this.file,
  };
  get status(): string | undefined {
    return this.statuses.at(-1);
  }
}

export const uiReporter: Reporter = { notify: (ctx, m, t) => ctx.ui.notify(m, t) };

/** A payload shaped like pi's Anthropic params with one earlier thinking block. */
export function samplePayload(): Record<string, any> {
  return {
    model: "claude-fable-5-2",
    max_tokens: 32000,
    stream: true,
    system: [{ type: "text", text: "You are pi.", cache_control: { type: "ephemeral" } }],
    tools: [{ name: "bash", description: "run", input_schema: { type: "object" } }],
    thinking: { type: "enabled", budget_tokens: 16384 },
    messages: [
      { role: "user", content: [{ type: "text", text: "hi" }] },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "t1", signature: "SIG1" },
          { type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } },
        ],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a\nb", is_error: false, cache_control: { type: "ephemeral" } }] },
    ],
  };
}

/** pi's assistant message for a reply with thinking and a tool call. */
export function sampleReply(over: Record<string, unknown> = {}): any {
  return {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "t2", thinkingSignature: "SIG2" },
      { type: "toolCall", id: "toolu_2", name: "bash", arguments: { command: "pwd" } },
    ],
    api: "anthropic-messages",
    provider: "anthropic",
    model: "claude-fable-5-2",
    usage: { input: 10, output: 20, cacheRead: 30, cacheWrite: 40, totalTokens: 100, cost: {} },
    stopReason: "toolUse",
    timestamp: 1,
    ...over,
  };
}
