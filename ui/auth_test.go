package ui

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSafeNext(t *testing.T) {
	for i, tc := range []struct{ in, want string }{
		{"/ui/sessions/demo", "/ui/sessions/demo"},
		{"/ui/", "/ui/"},
		{"", "/ui/"},
		{"https://evil.example/ui/", "/ui/"},
		{"//evil.example/ui/", "/ui/"},
		{"/ui//evil.example", "/ui/"},
		{"/ui/\\evil", "/ui/"},
		{"/ui/x\r\nSet-Cookie: a=b", "/ui/"},
		{"/mcp", "/ui/"},
	} {
		if got := safeNext(tc.in); got != tc.want {
			t.Errorf("Test %d: safeNext(%q) = %q, want %q", i, tc.in, got, tc.want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	public := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	for i, tc := range []struct {
		local        net.Addr
		method, host string
		origin       string
		ok           bool
	}{
		{loop, http.MethodPost, "127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{loop, http.MethodPost, "127.0.0.1:8080", "", true},
		{loop, http.MethodPost, "127.0.0.1:8080", "null", false},
		{loop, http.MethodPost, "127.0.0.1:8080", "http://evil.example", false},
		{loop, http.MethodGet, "evil.example:8080", "", false}, // DNS rebinding
		{loop, http.MethodGet, "localhost:8080", "", true},
		{public, http.MethodPost, "mcp.example:8080", "http://mcp.example:8080", true},
		{public, http.MethodPost, "mcp.example:8080", "http://other.example", false},
		{public, http.MethodGet, "mcp.example:8080", "http://other.example", true}, // reads change nothing
	} {
		r := httptest.NewRequest(tc.method, "http://"+tc.host+"/ui/", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
		if err := sameOrigin(r); (err == nil) != tc.ok {
			t.Errorf("Test %d: sameOrigin(%s %s, Origin %q) = %v, want ok=%v", i, tc.method, tc.host, tc.origin, err, tc.ok)
		}
	}
}

func TestCSRFTokenBindsCredentialAndKey(t *testing.T) {
	a := &Handler{cfg: Config{Key: []byte("0123456789abcdef0123456789abcdef")}}
	b := &Handler{cfg: Config{Key: []byte("fedcba9876543210fedcba9876543210")}}
	if a.csrfToken("alice") == a.csrfToken("bob") {
		t.Error("two credentials share a CSRF token")
	}
	if a.csrfToken("alice") == b.csrfToken("alice") {
		t.Error("two keys give the same CSRF token")
	}
	r := httptest.NewRequest(http.MethodPost, "/ui/api/sessions/x/act", nil)
	r.Header.Set(CSRFHeader, a.csrfToken("alice"))
	if !a.checkCSRF(r, "alice") || a.checkCSRF(r, "bob") || b.checkCSRF(r, "alice") {
		t.Error("checkCSRF accepts a token for another credential or key, or refuses the right one")
	}
}
