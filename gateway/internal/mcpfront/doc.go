// Package mcpfront is toolgate's MCP front: everything between a client's
// bytes and the gateway's call pipeline.
//
// It owns the streamable HTTP transport end to end (post.go, get.go): one
// POST handler reads the body under the cap and decodes each message once
// (message.go), looks its session up once (session.go; toolgate's own
// session type, registered with mcp-go), and serves both protocol eras, a
// 2026-07-28 request with no session at all. A tools/call, on every
// transport, runs through the front's own call path (call.go): its tool
// looked up once, its result written by the front (an upstream's as it
// came). Everything a request causes before its answer — progress, log
// messages, requests to the client — goes out on that request's own
// response (package eventstream; ask.go); a session's other notifications on its GET
// stream. JSON-RPC batches (batch.go), the 2026-07-28 multi-round-trip
// requests (modern.go), serving the sources' resources and prompts
// (surface.go, scope.go: package surface decides what is served and who
// may see it) and the stdio pump (stdio.go) are here too.
//
// mcp-go's MCPServer is what it is good at: the dispatcher of every method
// but tools/call and tools/list (HandleMessage), the type library, the legacy SSE and
// stdio servers. The front relies on these facts of mcp-go v1.2.1, each
// in the files named, and each pinned by the tests named:
//
//  1. HandleMessage serves a message in the session ctx carries
//     (MCPServer.WithContext): initialize sets the client's info and
//     capabilities on a SessionWithClientInfo (the negotiated version is
//     read from its result), logging/setLevel the level on a
//     SessionWithLogging (call.go, session.go; TestSurfaceSubscribeAndLevel,
//     TestElicit).
//  2. RegisterSession and UnregisterSession call the session hooks, and
//     its broadcasts (list_changed, SendNotificationToSpecificClient,
//     SendLogMessageToSpecificClient) queue on a registered session's
//     NotificationChannel without blocking, dropping what does not fit
//     (front.go, session.go, surface.go; TestBatchLeavesNotificationsQueued).
//  3. A 2026-07-28 message is one whose _meta names that version:
//     HandleMessage reads its protocol information from it, gives its
//     results their resultType, serverInfo and cache hints, and makes no
//     header checks when ctx carries no headers (the front makes them:
//     modernInfo) (post.go; TestModern2026, TestModernVersionsAndHeaders).
//  4. subscriptions/listen records its filter on a
//     SessionWithSubscriptionFilter, acknowledges on the session's
//     channel and holds until ctx ends; broadcasts honour the filter
//     (post.go, session.go; TestModern2026).
//  5. Its SSE handler writes the endpoint event, carrying the session ID,
//     first and in one Write, sets Access-Control-Allow-Origin: * on the
//     stream, and registers the session with a ctx derived from the
//     request's (sse.go; TestSSEStreamKeepsToolgateOrigin, TestBatchSSE,
//     TestMaxSessions).
//  6. Its stdio server registers the process-wide session "stdio", calls
//     its context function with it, and writes each message in one Write
//     (stdio.go; TestBatchStdio).
//  7. An after-list hook's changes to a result are sent, and
//     WithPaginationLimit pages the resource, template and prompt lists by
//     name with cursors that are base64 of the last name (surface.go, and
//     package surface's cursors; TestSurfacePages).
//  8. A resource, template or prompt handler's Go error reaches the client
//     as -32603 with the error's text; resources, templates and prompts
//     are listed sorted by name, and resources/read goes to a listed URI's
//     handler, else to the first template matching it (surface.go, and
//     package surface's Owner, which admitRead asks; TestSurface).
//  9. Its after-hooks of logging/setLevel and resources/subscribe run
//     before the answer is sent (surface.go; TestSurfaceSubscribeAndLevel).
//  10. WithPromptFilter filters prompts/list before paging, and answers a
//     prompts/get of a prompt it leaves out as of an unknown one; the
//     after-hooks of resources/list and templates/list see the request's
//     context, principal included (scope.go, surface.go; TestSurfaceScoped).
//
// It talks to the gateway through [Backend] and [Tool], and knows nothing
// else of it. mcpfront must not import gateway, chi or prometheus; only
// the gateway (and its tests) import it.
package mcpfront
