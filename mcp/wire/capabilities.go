package wire

import (
	"encoding/json"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"
)

// MetaRequiresCapabilities is the tool _meta key listing the client
// capabilities a tool cannot run without (for example ["sampling"]).
const MetaRequiresCapabilities = "mcpswarm/requiresClientCapabilities"

// RequiredCapabilities reads a tool's MetaRequiresCapabilities list.
func RequiredCapabilities(t *mcp.Tool) []string {
	if t == nil || t.Meta == nil {
		return nil
	}
	var out []string
	switch v := t.Meta.AdditionalFields[MetaRequiresCapabilities].(type) {
	case []string:
		out = append(out, v...)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// MissingCapabilities returns the capabilities of required that a
// 2026-07-28 request's _meta clientCapabilities (in params) does not
// declare, sorted.
func MissingCapabilities(params json.RawMessage, required []string) []string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	var declared map[string]json.RawMessage
	if raw, ok := p.Meta[mcp.MetaKeyClientCapabilities]; ok {
		_ = json.Unmarshal(raw, &declared)
	}
	var missing []string
	for _, c := range required {
		if v, ok := declared[c]; !ok || string(v) == "null" {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	return missing
}
