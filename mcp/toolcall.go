package mcp

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// recovered runs h: a panic becomes the call's error.
func recovered(ctx context.Context, h ToolHandler, req mcp.CallToolRequest) (result *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, r)
		}
	}()
	return h(ctx, req)
}
