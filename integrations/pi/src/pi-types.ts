// The small slice of pi's extension API this extension uses, written structurally so the
// extension loads under either npm scope (@mariozechner/pi-coding-agent 0.5x-0.7x and
// @earendil-works/pi-coding-agent 1.x) without importing pi at runtime. Shapes were read
// from pi-coding-agent 0.73.1's dist/core/extensions/types.d.ts and pi-ai's types.

export interface PiTextBlock {
  type: "text";
  text: string;
}
export interface PiThinkingBlock {
  type: "thinking";
  thinking: string;
  thinkingSignature?: string;
  redacted?: boolean;
}
export interface PiToolCallBlock {
  type: "toolCall";
  id: string;
  name: string;
  arguments?: Record<string, unknown>;
}
export type PiAssistantBlock = PiTextBlock | PiThinkingBlock | PiToolCallBlock | { type: string; [k: string]: unknown };

export interface PiUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens?: number;
  /** pi 1.x: the part of cacheWrite written at the 1-hour lifetime. */
  cacheWrite1h?: number;
  /** pi 1.x: thinking tokens (a part of output). */
  reasoning?: number;
}

/** pi-ai's AssistantMessage (the `message` of message_end when role is assistant). */
export interface PiAssistantMessage {
  role: "assistant";
  content: PiAssistantBlock[];
  api?: string;
  provider?: string;
  model?: string;
  usage?: PiUsage;
  stopReason?: "stop" | "length" | "toolUse" | "error" | "aborted";
  errorMessage?: string;
  timestamp?: number;
  /**
   * pi 1.x (@earendil-works): notes on the response. The Anthropic provider records the
   * response's input_transformations as {type: "anthropic_input_transformations",
   * details: {transformations: [{type, path, reason}]}} when non-empty.
   */
  diagnostics?: { type?: string; details?: unknown }[];
}

export interface PiModel {
  id: string;
  name?: string;
  api?: string;
  provider?: string;
  baseUrl?: string;
}

export interface PiSessionManager {
  getSessionId(): string;
  getLeafId(): string | null;
  getSessionFile(): string | undefined;
  /** The entries from the root to the current leaf. */
  getBranch?(): { id: string }[];
  /** Every entry of the session file (all branches), in file order. */
  getEntries?(): { type: string; customType?: string; data?: unknown }[];
}

export interface PiUI {
  notify(message: string, type?: "info" | "warning" | "error"): void;
  setStatus(key: string, text: string | undefined): void;
}

export interface PiContext {
  ui: PiUI;
  hasUI: boolean;
  cwd: string;
  sessionManager: PiSessionManager;
  model: PiModel | undefined;
  /** The current turn's abort signal (undefined when idle). */
  signal?: AbortSignal;
}

export type PiHandler<E> = (event: E, ctx: PiContext) => unknown | Promise<unknown>;

export interface PiExtensionAPI {
  on(event: string, handler: PiHandler<any>): void;
  /** Appends a `custom` entry (never sent to the model) to the session file. */
  appendEntry(customType: string, data?: unknown): void;
}
