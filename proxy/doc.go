// Package proxy is bindery's gateway: an Anthropic Messages API endpoint
// on loopback that any client able to set a base URL (Claude Code, the
// SDKs, opencode) points at, and that is a host of bindery's API as the pi
// extension is. It reads the client's request, asks the daemon through
// api's client which thinking blocks the provider will accept, forwards,
// streams the answer back as it arrives, and accepts the reply. Nothing
// of the decision is restated here; the proxy never imports the daemon's
// packages, never writes bindery's state, and the daemon never reaches the
// network.
//
// What it promises a client:
//
//   - Compile, forward, stream, accept: every POST /v1/messages (any query
//     string) is compiled and forwarded with the client's headers; the
//     answer streams back read by read, pings included, while a copy is
//     assembled on the side and accepted after message_stop. A stream cut
//     midway, an error event, a client that goes away (the upstream request
//     is then cancelled) accept nothing. POST /v1/messages/count_tokens is
//     compiled as a dry run (it runs the same binding check and mints
//     nothing). Every other path passes through.
//   - Bytes: when nothing is stripped the upstream receives the client's
//     bytes unchanged; when something is, only the stripped blocks and any
//     message the strip empties are cut out. Signatures are opaque: never
//     parsed, validated, repaired or blanked; a signed block with empty text
//     is a block.
//   - No binding 400 reaches the client (retry.go), except when it asked
//     for prefix_mismatch_behavior "error". A client's drop_block stays,
//     and the drops the provider reports are released by the accept.
//   - Fail open: with the daemon down, slow or failing, the request goes
//     upstream as the client sent it after at most CompileTimeout, the
//     proxy says so once, and while it stays down no request waits on it.
//     The proxy never makes a request fail that would have succeeded
//     without it.
//   - Credentials (x-api-key, Authorization) pass through untouched and
//     are never logged, recorded or shown; the proxy listens on loopback
//     only (Loopback).
//   - Bounds: a body over MaxBody is 413 request_too_large; malformed JSON
//     400 invalid_request_error; over MaxStreams in flight 529
//     overloaded_error; an upstream silent for IdleTimeout mid-stream ends
//     the stream with an error event. The proxy's own errors are in the
//     API's error shape with x-should-retry set; the upstream's pass
//     unmodified.
//
// Which conversation a request belongs to is in conversation.go.
package proxy
