// The glue between core.ts and VS Code: a status bar item, an output
// channel with the live feed, commands, and the report chart in a webview.
// Kept thin on purpose: what it shows is decided in core.ts, which is tested
// against a real daemon without VS Code.
import * as vscode from "vscode";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Bindery, eventLine, statusText } from "./core";

export function activate(ctx: vscode.ExtensionContext): void {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
  const conf = vscode.workspace.getConfiguration("bindery");
  const b = new Bindery({ cmd: conf.get<string>("path") || "bindery", socket: conf.get<string>("socket") || undefined, workspace: folder });

  const item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  item.command = "bindery.tail";
  item.tooltip = "bindery: thinking kept and stripped by the live pi session of this workspace";
  item.text = statusText(b.state);
  item.show();
  const feed = vscode.window.createOutputChannel("bindery");
  b.onChange = (st) => {
    item.text = statusText(st);
  };
  b.onEvent = (ev) => feed.appendLine(eventLine(ev));

  const show = async (title: string, args: string[]) => {
    const res = await b.cli(args);
    const doc = await vscode.workspace.openTextDocument({ content: res.stdout + res.stderr, language: "plaintext" });
    await vscode.window.showTextDocument(doc, { preview: true });
    if (res.code !== 0) void vscode.window.showWarningMessage(`bindery ${title}: exit ${res.code}`);
  };
  const live = (): string | undefined => {
    if (!b.state.session) void vscode.window.showWarningMessage("bindery: no pi session in this workspace");
    return b.state.session;
  };

  ctx.subscriptions.push(
    item,
    feed,
    { dispose: () => b.stop() },
    vscode.commands.registerCommand("bindery.status", () => show("status", ["status"])),
    vscode.commands.registerCommand("bindery.sessions", () => show("sessions", ["sessions", "--cwd", folder])),
    // bindery proxy's conversations (Claude Code, opencode, the SDKs) belong to no workspace: all of them.
    vscode.commands.registerCommand("bindery.conversations", () => show("conversations", ["conversations"])),
    vscode.commands.registerCommand("bindery.show", () => {
      const id = live();
      if (id) return show("show", ["show", id]);
    }),
    vscode.commands.registerCommand("bindery.tail", () => feed.show(true)),
    vscode.commands.registerCommand("bindery.report", async () => {
      const id = live();
      if (!id) return;
      const path = join(tmpdir(), `bindery-report-${id}.html`);
      const res = await b.cli(["report", "--session", id, "--chart", path]);
      if (res.code !== 0) return void vscode.window.showErrorMessage(`bindery report: ${res.stderr}`);
      const panel = vscode.window.createWebviewPanel("binderyReport", `bindery report ${id}`, vscode.ViewColumn.Active, {});
      panel.webview.html = await readFile(path, "utf8");
    }),
  );
  b.start();
}

export function deactivate(): void {}
