// Package report computes what thinking and prompt caching cost, per pi
// session and over the watched archive (design/economics.md), as the
// api's report types (api/report.go, api/whatif.go); the CLI renders
// them. It is pure:
// it reads the entries and compile events it is given, does no I/O and
// reads no clock. The daemon feeds it; db caches its per-session
// summaries.
//
// # Which entries
//
// A session is analysed on its current branch: the path from the current
// leaf (the last entry in file order, the leaf pi picks when it loads the
// file) up its parentId links to the root. Assistant messages on abandoned
// branches are counted (Requests.OffBranch) and otherwise ignored. Every
// assistant message on the branch is one request. Replies with stopReason
// "error" or "aborted" are counted apart (Figures.Apart): they were billed,
// but pi never resends them, so they are not turns, carry no thinking into
// later prompts and take part in no cycle figure.
//
// # Cycles and thinking
//
// A thinking cycle runs from a user message holding any non-tool-result
// content (watcher.Entry.UserText, or a branch summary) to the next. Its
// length is its completed assistant turns; cycles without one are not
// counted. Rewrites a pruner makes at request time are not in the file and
// are not seen. Thinking tokens are estimated as ceil(chars/4) per block.
// For each request the report estimates the thinking its prompt carried:
// the open cycle's thinking is billed on every model; closed cycles'
// thinking is dropped for free by last-turn-only models (Sonnet 4.5 and
// earlier, Haiku 4.5 and earlier, Opus 4.1 and earlier) and billed by
// keep-all models and by models of unknown regime
// (research/preserved-thinking.md section 4). A compaction entry drops the
// thinking before its firstKeptEntryId from later prompts.
//
// # Cache breaks
//
// Over the branch's requests that carry input, cacheRead and cacheWrite
// and a non-empty prompt (prompt = input + cacheRead + cacheWrite), in
// order, request i is a cache break when it reads less than what the
// previous such request left cached (cacheRead_prev + cacheWrite_prev),
// up to what its own prompt can reuse: cacheRead_i < min(left, prompt_i).
// The tokens rewritten are min(cacheWrite_i, min(left, prompt_i) -
// cacheRead_i): what it wrote again. An ordinary appended turn reads
// exactly what the turn before left, so it is never a break; a cold write
// right after a cold write, and a full rewrite of a prompt that shrank
// slightly, are. The break's cost is those tokens at the request's
// cache-write price, its excess that cost minus reading them. Its cause,
// the first that holds: "compaction" (a compaction or branch summary
// entry between the two), "strip" (bindery's compile reported the change
// as its own strip), "host" (the compile saw the host change the prefix),
// "model" (a model or thinking-level change between the two, or another
// model), "idle" (more than CacheLifetime since the previous request or
// the pi cache warm after it), else "unknown". Avoidable spend is the
// excess of strip, host and unknown breaks (api.Avoidable).
//
// # What-if replay
//
// Replay (whatif.go) replays a session under thinking policies with a
// prompt-cache model and checks itself against the recording first.
//
// # Prices
//
// A request is priced from pi's usage.cost when it has input, output,
// cacheRead and cacheWrite parts, else from the price table (Prices: cited
// rows only, overridable by a JSON file), else from cost.total alone, else
// not at all: its tokens are counted, its price is reported unknown.
//
// # Incremental reports
//
// Analyze is a walk along the branch (aggregate.go) whose state an
// Aggregate keeps: every figure but what bindery's compile events decide
// (the Bindery totals and the strip and host break causes), and whether
// the price table was consulted. Extend walks appended entries when they
// extend the branch, so the daemon keeps each session's Aggregate current
// inside the ingest transaction; Summary turns an Aggregate and the
// session's compile events into exactly Analyze's Summary. A Summary is
// mergeable (sums and exact histograms; cycle lengths are kept as an exact
// histogram, so archive medians and p90 are exact). A caller caches each
// Summary under Stamp (ingest progress, compile events, price table,
// format version) and recomputes a stale one from the Aggregate;
// ArchiveReport then merges summaries without touching entries.
package report
