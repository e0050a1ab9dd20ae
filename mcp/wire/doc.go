// Package wire is the JSON-RPC wire format of the MCP front: the one
// decode of every message the front reads and the one encoder of every
// message it writes.
//
// # What it owns
//
// Reading: Decode reads a message's envelope (Envelope: jsonrpc, id,
// method, and params, result and error left raw); DecodeID reads its id;
// CallToolName and DecodeCallTool read a tools/call's tool name and whole
// request. Each gives exactly what json.Unmarshal gives on the same bytes,
// errors included, and reads the common shape of a message by one scan
// instead of reflection.
//
// Writing: AppendResult, AppendError, AppendNotification and AppendRequest
// append a response, an error response, a notification and a request the
// server sends to a client. Each appends exactly the bytes json.Marshal
// writes for the equivalent mcp-go value (mcp.JSONRPCResponse,
// mcp.JSONRPCError, mcp.JSONRPCNotification, mcp.JSONRPCRequest), HTML
// escaping and the replacement of invalid UTF-8 included, so a client
// cannot tell the front from mcp-go's transports by its bytes. A tool's
// answer (*mcp.CallToolResult) is written by hand; other values go through
// encoding/json behind the same calls.
//
// Fuzz tests hold both directions to encoding/json on arbitrary input.
//
// # What it does not own
//
// No I/O: callers hand in the bytes they read and write the bytes they
// get back (appending the newline json.Encoder would add, or an SSE
// frame). No protocol rules either: which method is allowed, which id a
// response needs, what a result holds are the dispatcher's. The types are
// mcp-go's (github.com/mark3labs/mcp-go/mcp).
package wire
