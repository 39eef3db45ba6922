import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** Everything under the `bindery` key of pi's settings.json. Every field is optional. */
export interface BinderySettings {
  /** Turn the extension off without uninstalling it. Default true. */
  enabled: boolean;
  /** The daemon's Unix socket. Default: see defaultSocketPath. */
  socketPath: string;
  /**
   * When bindery cannot answer: true (default) sends pi's payload unchanged, exactly as
   * without the extension; false strips every thinking block from the payload instead
   * (never risks a refused block, loses the model's earlier reasoning).
   */
  failOpen: boolean;
  /**
   * After the provider refused a block in a session, send
   * `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` with its beta header on
   * every later request of that session (direct Anthropic routes only). Default false:
   * on accounts not enforced by default, setting the field opts into enforcement.
   */
  dropBlock: boolean;
  /** Extra hosts treated as direct Anthropic for dropBlock (e.g. a trusted proxy). */
  dropBlockHosts: string[];
  /** Compile deadline in ms (the request waits at most this long for bindery). */
  compileTimeoutMs: number;
  /** Accept and release deadline in ms (these run after the response, off pi's hot path). */
  callTimeoutMs: number;
}

type Env = Record<string, string | undefined>;

/**
 * The daemon's default socket, resolved the way bindery's own client resolves it
 * (api/paths.go DefaultSocket): $BINDERY_SOCKET, else $RUNTIME_DIRECTORY/bindery.sock
 * (systemd), else $XDG_RUNTIME_DIR/bindery/bindery.sock, else <state dir>/run/bindery.sock
 * with the state dir $BINDERY_STATE_DIR, $STATE_DIRECTORY, $XDG_STATE_HOME/bindery or
 * ~/.local/state/bindery.
 */
export function defaultSocketPath(env: Env = process.env, home: string = homedir()): string {
  const first = (list: string) => list.split(":")[0];
  if (env.BINDERY_SOCKET) return env.BINDERY_SOCKET;
  if (env.RUNTIME_DIRECTORY) return join(first(env.RUNTIME_DIRECTORY), "bindery.sock");
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, "bindery", "bindery.sock");
  let state: string;
  if (env.BINDERY_STATE_DIR) state = env.BINDERY_STATE_DIR;
  else if (env.STATE_DIRECTORY) state = first(env.STATE_DIRECTORY);
  else if (env.XDG_STATE_HOME) state = join(env.XDG_STATE_HOME, "bindery");
  else state = join(env.HOME || home, ".local", "state", "bindery");
  return join(state, "run", "bindery.sock");
}

/** pi's agent dir: $PI_CODING_AGENT_DIR (with ~ expanded), else ~/.pi/agent. */
export function agentDir(env: Env = process.env, home: string = homedir()): string {
  const v = env.PI_CODING_AGENT_DIR;
  if (v) {
    if (v === "~") return home;
    if (v.startsWith("~/")) return join(home, v.slice(2));
    return v;
  }
  return join(home, ".pi", "agent");
}

export function defaultSettings(env: Env = process.env, home: string = homedir()): BinderySettings {
  return {
    enabled: true,
    socketPath: defaultSocketPath(env, home),
    failOpen: true,
    dropBlock: false,
    dropBlockHosts: [],
    compileTimeoutMs: 2000,
    callTimeoutMs: 2000,
  };
}

export interface SettingsResult {
  settings: BinderySettings;
  /** Problems found reading the files: reported once, never fatal. */
  warnings: string[];
}

function readBinderyKey(path: string, warnings: string[]): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return {}; // no file: nothing set there
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    warnings.push(`${path}: not valid JSON (${(err as Error).message}); bindery settings there ignored`);
    return {};
  }
  const v = (parsed as Record<string, unknown> | null)?.bindery;
  if (v === undefined) return {};
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    warnings.push(`${path}: "bindery" must be an object; ignored`);
    return {};
  }
  return v as Record<string, unknown>;
}

function apply(into: BinderySettings, from: Record<string, unknown>, where: string, warnings: string[]): void {
  for (const [k, v] of Object.entries(from)) {
    switch (k) {
      case "enabled":
      case "failOpen":
      case "dropBlock":
        if (typeof v === "boolean") into[k] = v;
        else warnings.push(`${where}: bindery.${k} must be true or false`);
        break;
      case "socketPath":
        if (typeof v === "string" && v !== "") into.socketPath = v.startsWith("~/") ? join(homedir(), v.slice(2)) : v;
        else warnings.push(`${where}: bindery.socketPath must be a non-empty string`);
        break;
      case "dropBlockHosts":
        if (Array.isArray(v) && v.every((h) => typeof h === "string")) into.dropBlockHosts = v as string[];
        else warnings.push(`${where}: bindery.dropBlockHosts must be a list of host names`);
        break;
      case "compileTimeoutMs":
      case "callTimeoutMs":
        if (typeof v === "number" && Number.isFinite(v) && v > 0) into[k] = v;
        else warnings.push(`${where}: bindery.${k} must be a positive number of milliseconds`);
        break;
      default:
        warnings.push(`${where}: unknown setting bindery.${k} ignored`);
    }
  }
}

/**
 * Reads the `bindery` key from pi's global settings (<agentDir>/settings.json) and the
 * project's (<cwd>/.pi/settings.json), project winning key by key, as pi merges its own.
 */
export function loadSettings(cwd: string, env: Env = process.env, home: string = homedir()): SettingsResult {
  const warnings: string[] = [];
  const settings = defaultSettings(env, home);
  const globalPath = join(agentDir(env, home), "settings.json");
  const projectPath = join(cwd, ".pi", "settings.json");
  apply(settings, readBinderyKey(globalPath, warnings), globalPath, warnings);
  if (projectPath !== globalPath) apply(settings, readBinderyKey(projectPath, warnings), projectPath, warnings);
  return { settings, warnings };
}
