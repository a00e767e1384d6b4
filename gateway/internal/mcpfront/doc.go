// Package mcpfront is toolgate's MCP front: everything between a client's
// bytes and the gateway's call pipeline. It owns the mcp-go server and the
// tools registered in it, the HTTP routing of the MCP endpoints
// (streamable HTTP, legacy SSE), streamable HTTP sessions and their idle
// expiry, the sessionless requests of protocol 2026-07-28 (era2026.go),
// JSON-RPC batches, the preflight that answers unknown tools (and
// its allocation-free scanner), the stdio pump, the bounded event store and
// the mapping of toolgate's results to MCP's. It talks to the gateway
// through [Backend] (resolve a name, a session began or ended, drain) and
// [Tool] (run a call), and knows nothing else of it.
//
// This is the one package that depends on how mcp-go is built inside, so
// an mcp-go upgrade touches only it (and executors/mcpup, the client side).
// It relies on these facts of mcp-go v1.2.1, each pinned by a test:
//
//  1. mcp-go has no JSON-RPC batches: it answers an array with -32700
//     (TestMCPGoInternals/1); batch.go splits batches itself.
//  2. mcp-go answers a tools/call of an unknown tool with -32602 and no
//     data, and a handler cannot choose a JSON-RPC code
//     (TestMCPGoInternals/2); preflight.go answers unknown tools with
//     suggestions before mcp-go sees the call.
//  3. Its streamable HTTP session type is unexported and is told apart by
//     its UpgradeToSSEWhenReceiveNotification method
//     (TestMCPGoInternals/3); sessions.go expires only those.
//  4. Its streamable handler runs the DNS-rebinding Host check first and
//     answers a HEAD with 200 and nothing else (TestMCPGoInternals/4);
//     batch.go takes the Host verdict for a batch from a HEAD.
//  5. Its SSE handler writes the endpoint event, carrying the session ID,
//     first and in one Write (TestMCPGoInternals/5); http.go's sseStream
//     learns the session from it and interleaves its own replies.
//  6. CallToolRequest keeps the arguments' raw bytes
//     (TestMCPGoInternals/6); proxied calls forward them.
//  7. Its streamable POST handling starts a forwarder that drops session
//     notifications it cannot stream, and streams them in the reply to a
//     POSTed notification when it can (TestBatchKeepsSessionNotifications,
//     TestNotificationPostAccepted); batches and single notifications
//     therefore run through HandleMessage in the session.
//  8. It counts as session activity only its own POST and GET handling, and
//     a DELETE with Mcp-Session-Id ends a session as a client would
//     (TestIdleExpiry); toolgate expires idle sessions itself.
//  9. It registers a session for a GET naming no or an unknown ID, which
//     with an event store outlives the GET (TestMCPGoSessionInternals/8);
//     sessions.go's serveStream answers such a GET 400 or 404 before
//     mcp-go sees it. It calls the register hook with a ctx derived from
//     the request's (TestMCPGoSessionInternals/8), asks a session ID
//     resolver with the request (TestMCPGoSessionInternals/9), and
//     registers an initialized session with its protocol version already
//     set (TestBatchAfterReinitialize). server.max_sessions rests on the
//     hook's ctx and the resolver's request: they tie a session, and its
//     ID, to the slot its request reserved.
//  10. AddTools replaces a tool of the same name in place
//     (TestRelistKeepsTools); [Front.SetTools] never deletes a tool it
//     re-adds.
//  11. Without an event store it loses progress notifications under
//     concurrency (mark3labs/mcp-go PR #969), and its own store keeps every
//     event until the session ends (TestMCPGoInternals/7); eventstore.go is
//     a bounded one (TestEventStoreIsBounded).
//  12. Its stdio server runs 5 calls at once unless told otherwise, its
//     session is the process-wide "stdio", and it writes each message in
//     one Write (TestBatchStdio).
//  13. A session keeps the capabilities its client declared in initialize
//     (server.SessionWithClientInfo.GetClientCapabilities, on every
//     transport's session), and MCPServer.RequestElicitation sends
//     elicitation/create to the calling session and returns its answer
//     (TestElicit, TestBatchClientResponses); [Request.Elicit] is set only
//     for a client that declared elicitation.
//  14. Its stateful session ID manager keeps the ID of every ended session
//     forever (TestMCPGoSessionInternals/10), and one issued to an
//     initialize that registers no session; sessions.go's sessionIDs
//     replaces it and forgets both (TestEndedSessionIDsForgotten).
//  15. Its SSE handler sets Access-Control-Allow-Origin: * on the stream
//     unless given its own CORS settings (TestMCPGoSSEAllowsAnyOrigin);
//     http.go's sseStream puts back what toolgate set, or nothing
//     (TestSSEStreamKeepsToolgateOrigin).
//  16. A tool removed by a WithToolFilter filter cannot be called either
//     (tools/call answers "not found"), while an after-list-tools hook
//     may change the result it is given before it is sent
//     (TestMCPGoToolListHook); with authentication, tools/list is
//     filtered by that hook and the pipeline's permit step refuses calls.
//  17. It decides each streamable HTTP request's protocol era by itself
//     (the Mcp-Protocol-Version header or params._meta naming 2026-07-28
//     or later), serves a 2026-07-28 request in an ephemeral session with
//     no ID, registering none and never calling the session hooks, and
//     serves server/discover, subscriptions/listen and the cache hints
//     itself (TestModern2026, TestMCPGoModernInternals); era2026.go routes
//     such requests past the session checks, with the caller's identity
//     from the request's context.
//  18. It answers a legacy request whose Mcp-Protocol-Version it does not
//     know with 400 and plain text (TestMCPGoModernInternals); era2026.go
//     answers every unknown or malformed version first, -32022 with the
//     served versions in a JSON-RPC body.
//  19. A 2026-07-28 tools/call's result gets resultType "complete" and
//     the server's name and version in _meta, a tool's handler is
//     reachable through GetTool, and WithRequestProtocolInfo makes a
//     request modern (TestMCPGoModernInternals); era2026.go's fast path
//     calls the handler itself for a call that can send no notification,
//     and answers what mcp-go would (TestModernCallMatchesMCPGo).
//  20. Its server options are functions of the server that take effect
//     when applied after NewMCPServer, before the first session (TestSurface
//     checks the initialize capabilities); surface.go's options are applied
//     that way.
//  21. Its after-hooks of logging/setLevel and resources/subscribe run
//     before the answer is sent (TestSurfaceSubscribeAndLevel): the level
//     reaches the upstreams before the client's next call.
//  22. A resource, resource template or prompt handler's Go error reaches
//     the client as -32603 with the error's text (TestSurface): an
//     upstream's JSON-RPC error code for those is not kept.
//  23. It lists resources, templates and prompts sorted by name, and routes
//     resources/read to a listed URI's handler, else to the first template
//     that matches it (TestSurface).
//  24. A session's RequestSampling, RequestElicitation and ListRoots reach
//     its client during one of its requests; over streamable HTTP,
//     sampling and roots only on the session's GET stream, which a client
//     need not open, and which can lose a request queued as it attaches
//     (with an event store the listening pump starts before the GET's
//     connection attaches, and a request it takes then is only recorded).
//     So relay.go and the front's elicit send a request over streamable
//     HTTP on the request's own stream instead (ask.go; TestRelay,
//     TestAskOnCallStream), and call these for SSE and stdio sessions
//     and for a request of a batch, which has no stream of its own.
//     Its session-wide GET stream and a call's POST stream both take the
//     session's notifications, so a call's last progress notification can
//     reach the client after the call's result (MCPGO.md, pitfall 1);
//     callstream.go writes a call's notifications on the call's own
//     response instead (TestCallNotificationsOnOwnStream). Its POST
//     handling writes its JSON answer in Writes beginning with '{', an
//     event in one Write or, with an event store, "id: N\n" and then the
//     rest (callstream.go holds an event's Writes until it is whole:
//     TestCallStreamEventsWhole), and treats a response that is an
//     http.Flusher as a stream (TestCallNotificationsOnOwnStream,
//     TestModernCallNotifications).
//  25. WithPaginationLimit pages tools/list, resources/list, resources/
//     templates/list and prompts/list, by name alone and with cursors that
//     are base64 of the last name; an after-list hook's changes to the
//     result are sent (TestSurfacePages). Tool and prompt names are
//     unique; resources and templates are paged again by name and URI in
//     surface.go's hooks.
//  26. A tool handler's result with resultType input_required reaches a
//     2026-07-28 client as it is, its inputRequests and requestState as
//     mcp.CallToolResult encodes them (it bridges such results to legacy
//     clients only); a retry's inputResponses, each the client's bytes
//     compacted, and requestState reach the handler in
//     CallToolParams.MultiRoundTripParams; and its RequestSampling (and
//     RequestElicitation, RequestRoots) refuse a 2026-07-28 request
//     (TestMCPGoMultiRoundTrip). mrtr.go answers such a client's calls
//     with input_required results while the call waits, detached, and
//     hands the retry's answers to it.
//
// mcpfront must not import gateway, chi or prometheus; only the gateway
// (and its tests) import it.
package mcpfront
