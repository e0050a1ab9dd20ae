package authz

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestChallenge(t *testing.T) {
	a := productionAuth(t)
	const meta = "https://node.example/.well-known/oauth-protected-resource"
	cases := []struct {
		name       string
		err        error
		header     string
		errorField string
	}{
		{"missing token", ErrNoToken,
			`Bearer realm="mcpswarm", resource_metadata="` + meta + `"`, "unauthorized"},
		{"bad token", fmt.Errorf("%w: token is expired", ErrBadToken),
			`Bearer realm="mcpswarm", resource_metadata="` + meta + `", error="invalid_token", error_description="the bearer token is invalid or expired"`, "invalid_token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.Challenge(w, tc.err, meta)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d", w.Code)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.header {
				t.Errorf("WWW-Authenticate\n got: %s\nwant: %s", got, tc.header)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var body map[string]string
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body["error"] != tc.errorField || body["error_description"] == "" {
				t.Errorf("body %v", body)
			}
			if strings.Contains(w.Body.String(), "token is expired") {
				t.Errorf("the body leaks the verification detail: %s", w.Body)
			}
		})
	}
	// A URL cannot break out of the quoted-string.
	w := httptest.NewRecorder()
	a.Challenge(w, ErrNoToken, "https://x/\", error=\"forged")
	if got, want := w.Header().Get("WWW-Authenticate"), `Bearer realm="mcpswarm", resource_metadata="https://x/, error=forged"`; got != want {
		t.Errorf("quoted url: %s", got)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	h := ProtectedResourceMetadataHandler("https://node.example/mcp", []string{"https://issuer.example"}, []string{"mcp"})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, WellKnownPath, nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 "https://node.example/mcp",
		"authorization_servers":    []any{"https://issuer.example"},
		"scopes_supported":         []any{"mcp"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "mcpswarm",
	}
	if fmt.Sprint(doc) != fmt.Sprint(want) {
		t.Errorf("doc %v\nwant %v", doc, want)
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, WellKnownPath, nil))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d allow=%q", w.Code, w.Header().Get("Allow"))
	}

	// Without authorization servers the key is omitted, not null.
	w = httptest.NewRecorder()
	ProtectedResourceMetadataHandler("https://n/mcp", nil, nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, WellKnownPath, nil))
	doc = nil
	_ = json.Unmarshal(w.Body.Bytes(), &doc)
	if _, ok := doc["authorization_servers"]; ok {
		t.Errorf("empty authorization_servers present: %s", w.Body)
	}
}
