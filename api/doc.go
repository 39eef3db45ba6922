// This file is the project's API reference: the wire contract as it stands,
// read with the page it started from (design/api.md, kept in the steering
// repository). Where the two differ, this file is the contract. Fields were
// only ever added; none was renamed or removed, so /v1/ still holds.
//
// # Added to design/api.md
//
// POST /v1/compile:
//   - The answer carries thinkingKept: the thinking blocks sent on, beside
//     thinkingStripped.
//   - request may be a Bedrock Converse body as well as an Anthropic
//     Messages body (binding/converse.go; README, "What bindery
//     compiles"): compiled, recorded and rewritten the same way; strips,
//     droppedMessages and paths index its messages and content arrays as
//     given.
//   - A body that is another API's (OpenAI chat: it carries a messages
//     array too) comes back byte for byte with bound false, nothing
//     recorded, and notMessages saying why (binding/foreign.go decides).
//     Its compile id (u_...) accepts and releases as a no-op.
//   - Strip reasons add unsigned: an empty signature or data, stripped on
//     every model, never a release.
//   - Limits (README, "Limits"): ids, sessionFile and the messages array
//     are bounded; over a bound the answer is 400 limit_exceeded naming the
//     field, its size, the bound and the flag. A body slower than
//     --min-body-rate is 408 body_timeout. A compile whose caller went away
//     records nothing.
//
// # Compile by reference
//
// A compile may name, in base, a compile bindery answered on the same
// conversation, and send in request only the messages after those it
// shares with that compile's request:
//
//	{"conversation": ..., "return": "plan", "request": {...the request, messages: the new ones...},
//	 "base": {"compileId": "c_...", "messages": N, "digest": "<sha256 hex>"}}
//
// N is how many of the base request's messages the request begins with;
// digest is the SHA-256 of those N messages' bytes as the base request
// carried them, from the first message's first byte to the N-th's last,
// separators included (a JSON.stringify host: the N messages' strings
// joined with ","). bindery checks the digest against the bytes it kept,
// rebuilds the whole request (its shared messages, then request's) and
// compiles that: the answer is exactly a full compile's, and paths in it
// count the whole request's messages. The host applies the plan
// (return: "plan") to its own request; return: "request" answers the whole
// rewritten request. The rebuilt request is bounded by --max-body and
// --max-messages as a whole one is.
//
// The base is refused, nothing recorded, with 409 base_unknown when bindery
// does not hold its bytes (a compile it never made, another conversation's,
// a dry run's, one evicted: it keeps the newest 2 real compiles of each
// conversation, 64 MiB in all, least recently used out first, in memory
// only, so none survives a restart; the memory of up to 4 evicted ones,
// 16 MiB in all, is reused by the next rebuilds), and 409 base_mismatch when the digest
// differs or the base has fewer than N messages. The host then compiles in
// full: a changed old message costs a strip, never a refusal, because
// bindery never decides on bytes it did not check. A compile by reference
// may build the whole request in its base's own memory, writing after the
// shared messages; that base then holds only those (the pi extension
// names its newest compile, so its next turn is unaffected): a later
// compile naming it with more is base_mismatch, one naming as many or
// fewer is rebuilt as before. The compile event of a
// compile by reference names its base (base). The pi extension compiles
// every turn after a run's first by reference, on a kept-alive connection,
// and compiles in full on base_unknown or base_mismatch.
//
// POST /v1/accept: reply may be in Bedrock Converse's shape (the message,
// a whole Converse response: output.message, or a ConverseStream
// response's events as a JSON array, assembled by
// binding.ConverseStreamReply); inputTransformations are
// then what Bedrock returns in
// additionalModelResponseFields.input_transformations, their paths counting
// a message's blocks without its cachePoint blocks. reply may also be a
// whole Messages response. When inputTransformations is empty, those the
// reply itself carries are read (a Messages response's or message_start's
// input_transformations, a Converse response's or messageStop's
// additionalModelResponseFields); a list given apart wins. A repeated accept
// answers 200 with repeated true while the compile is within the newest
// --accepted-window accepted compiles of its conversation; beyond it 404
// compile_forgotten, and an id this database never made 404 unknown_compile
// (compile ids carry their seq, so the two are told apart after any
// restart).
//
// POST /v1/release: the path of a Bedrock refusal (a ValidationException
// carrying the provider's messages.N.content.M text) counts blocks as
// accept's paths do. By signature, a block bindery holds no record of (no
// remembered compile sent it, no accept stamped it, no session file holds
// it) records nothing and answers released 0 with a reason.
//
// GET /v1/health: watcher.problems lists what is not followed now
// (folder-missing, folder-unreadable, unreadable, not-regular, long-line),
// each with path, kind, reason and since; watcher.ingestErrors the newest
// skipped lines with file, line and offset; watcher.degraded and
// watcher.lastRescan. bindery status exits 4 while anything but
// folder-missing is listed in problems: a folder pi has not made yet
// (before its first session) is waited for, not degraded.
//
// GET /v1/sessions: ?cwd=DIR (an absolute path, at most MaxWorkspacePath
// bytes) lists a workspace's sessions, those pi ran in DIR or a folder
// under it (InWorkspace); the editor integrations show its live session.
// engaged is read from the binding state.
//
// GET /v1/sessions/{id}: stamps and releases from the binding state;
// sameId when several files carry the id; problem and ingestErrors when
// the session's file is not followed or has skipped lines; each frontier
// element names owner, bindery's owner compile of that branch.
//
// GET /v1/conversations (added with bindery proxy): the conversations no
// pi session file names, the most recently active first, at most 1,000
// (ConversationList); client is the id's part before its first ':'.
//
// GET /v1/conversations/{id}: for a pi session, branches are the session
// tree's leaves (sessionTree true), each with owner, accepted, unaccepted,
// stamps, releases, entries and current; compileLeaves keeps one row per
// leaf compiled at; notInTree marks a compile leaf the file does not hold
// yet.
//
// GET /v1/account-salt (added with account-bound thinking): the store's
// salt, hex, the same for every host and for good. A compile's account is
// AccountFingerprint of the credential the request goes out under (32
// lowercase hex digits; anything else is 400 bad_request, never echoed);
// a block of an account-bound model stamped under another account is
// stripped with reason account-mismatch, not a release (account.go).
// POST /v1/account-alias {fingerprint, account}: the credential belongs to
// that account (its organization's fingerprint); the first alias of a
// fingerprint stays; at most 65,536 (409 conflict past it).
//
// GET /v1/events: a subscriber that falls behind is closed with 1008 and
// the reason "subscriber fell behind: N events buffered; resume with
// ?since=SEQ". Event types add stamp (a reply seen landing in a session
// file: source file or link) and input-transformation. Editors that have
// no websocket library read the same feed as NDJSON from `bindery tail
// --json` (one event object a line, the wire form; --since SEQ resumes),
// as integrations/nvim and integrations/vscode do.
//
// GET /v1/report: the answer is a Report (report.go), typed in this
// package: the report's wire contract, which the CLI renders without the
// daemon's packages. Report.Version is ReportFormat (4): the break rule is
// "reads less than the previous request left, up to what its prompt can
// reuse", with causes compaction, strip, host, model, idle, unknown
// (Causes; Avoidable says which count as avoidable spend); Break adds
// left, reusable and gap. Figures adds total (the one spend figure:
// requests, errored and aborted replies, cache warms, other usage; each
// archive session line's spend is its session's total), totalUnpriced,
// days (spend per UTC day by kind) and breaks.avoidable; a session report
// adds marks (compactions, branch summaries, model and thinking changes
// between requests); a session line adds avoidable.
//
// GET /v1/whatif[?session=ID][&keep=N]: the user's sessions (or one)
// replayed under the policies as-recorded, bindery, strip-all and
// keep-last-N (keep 1..MaxKeepLast, default DefaultKeepLast; another value
// is 400 bad_request, an unknown session 404 not_found). The answer is a
// WhatIf (whatif.go): per session its calibration (the as-recorded
// replay's cache read and write against pi's, OK within
// CalibrationTolerance; an uncalibrated session has no spend) and one
// PolicyResult per policy (tokens, thinking blocks read, breaks, spend,
// the difference against as-recorded); Archive sums the calibrated
// sessions.
//
// Errors: the codes, each with its status, are listed in errors.go;
// storage_full (507) and storage_failed (503) name the state folder.
//
// # Clients
//
// Session ids print as their shortest unique prefix (ShortIDs) and the CLI
// takes one back (MatchID); the wire always carries whole ids.
package api
