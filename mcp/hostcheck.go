package mcp

import "net/http"

// HostChecked applies the MCP endpoint's DNS-rebinding check to another
// handler of the same listener (the node's /metrics and /readyz): on a
// loopback listener, a request naming a non-loopback Host or Origin is
// refused with 403, so a page in a browser cannot read them either.
func HostChecked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rejectRebinding(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	})
}
