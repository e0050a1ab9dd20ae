package authz

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxTokenBytes bounds a bearer token; a longer one is refused unparsed.
const MaxTokenBytes = 8 << 10

// Authentication errors. Authenticate wraps them with detail for the logs;
// test with errors.Is.
var (
	// ErrNoToken: the request carries no Authorization header.
	ErrNoToken = errors.New("authz: no bearer token")
	// ErrBadToken: a credential was presented and did not verify. The request
	// must be refused; it never falls back to an unauthenticated principal.
	ErrBadToken = errors.New("authz: invalid bearer token")
)

// Authenticator verifies bearer tokens: static tokens the policy lists by
// SHA-256, and JWTs signed by the policy's key set. It is immutable and safe
// for concurrent use. A nil *Authenticator verifies nothing.
type Authenticator struct {
	tokens []staticToken
	jwt    *jwtVerifier
	roles  map[string][]string
	now    func() time.Time // nil: the system clock
	cache  *jwtCache        // verified JWTs; nil: no caching
}

// maxCachedJWTs bounds the verified-JWT cache.
const maxCachedJWTs = 4096

// jwtCache remembers JWTs that verified, by the SHA-256 of the whole token,
// until their exp, so a client sending the same token on every request pays
// for the signature check once. The key set cannot change while the
// Authenticator lives, so a verified token stays verified until it expires.
type jwtCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]cachedJWT
}

type cachedJWT struct {
	p   Principal
	exp time.Time
}

func newJWTCache() *jwtCache { return &jwtCache{m: map[[sha256.Size]byte]cachedJWT{}} }

func (c *jwtCache) get(key [sha256.Size]byte, now time.Time) (Principal, bool) {
	if c == nil {
		return Principal{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return Principal{}, false
	}
	if !now.Before(e.exp) {
		delete(c.m, key)
		return Principal{}, false
	}
	return e.p, true
}

func (c *jwtCache) put(key [sha256.Size]byte, p Principal, exp, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedJWTs {
		for k, e := range c.m {
			if !now.Before(e.exp) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxCachedJWTs {
			clear(c.m) // all live: start over rather than track recency
		}
	}
	c.m[key] = cachedJWT{p: p, exp: exp}
}

func (a *Authenticator) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// Required reports whether requests on an HTTP transport must carry a token:
// true whenever any credential is configured.
func (a *Authenticator) Required() bool {
	return a != nil && (len(a.tokens) > 0 || a.jwt != nil)
}

// Authenticate returns the verified principal of r's bearer token, with the
// policy's roles for its subject merged in. Without an Authorization header
// it returns ErrNoToken; any other failure (wrong scheme, oversized, unknown
// static token, a JWT failing its signature, algorithm, issuer, audience,
// expiry or subject checks, or a token sent where nothing can verify it)
// wraps ErrBadToken.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return Principal{}, ErrNoToken
	}
	if len(values) > 1 {
		return Principal{}, fmt.Errorf("%w: more than one Authorization header", ErrBadToken)
	}
	token, err := bearerToken(values[0])
	if err != nil {
		return Principal{}, err
	}
	return a.Verify(token)
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" value.
func bearerToken(h string) (string, error) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: the Authorization scheme is not Bearer", ErrBadToken)
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", fmt.Errorf("%w: empty bearer token", ErrBadToken)
	}
	if len(token) > MaxTokenBytes {
		return "", fmt.Errorf("%w: token longer than %d bytes", ErrBadToken, MaxTokenBytes)
	}
	// RFC 6750 b64token: A-Z a-z 0-9 - . _ ~ + / then any number of '='.
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0) {
			return "", fmt.Errorf("%w: token has a character outside the b64token alphabet", ErrBadToken)
		}
	}
	return token, nil
}

// Verify checks a raw bearer token (without the "Bearer " prefix): first
// against the static tokens, by SHA-256 in constant time over the whole list,
// then, if it looks like a JWT, against the JWT key set.
func (a *Authenticator) Verify(token string) (Principal, error) {
	if !a.Required() {
		return Principal{}, fmt.Errorf("%w: no token verification is configured", ErrBadToken)
	}
	if token == "" {
		return Principal{}, fmt.Errorf("%w: empty bearer token", ErrBadToken)
	}
	if len(token) > MaxTokenBytes {
		return Principal{}, fmt.Errorf("%w: token longer than %d bytes", ErrBadToken, MaxTokenBytes)
	}
	sum := sha256.Sum256([]byte(token))
	if len(a.tokens) > 0 {
		found := -1
		for i := range a.tokens {
			// Compare every entry, so the time taken does not say which
			// (or whether an early) entry matched.
			if subtle.ConstantTimeCompare(sum[:], a.tokens[i].hash[:]) == 1 {
				found = i
			}
		}
		if found >= 0 {
			t := a.tokens[found]
			return a.withPolicyRoles(Principal{Subject: t.subject, Roles: t.roles, Authenticated: true}), nil
		}
	}
	if a.jwt != nil && strings.Count(token, ".") == 2 {
		now := a.clock()
		if p, ok := a.cache.get(sum, now); ok {
			p.Roles = slices.Clone(p.Roles)
			return p, nil
		}
		p, exp, err := a.jwt.verify(token, a.now)
		if err != nil {
			return Principal{}, fmt.Errorf("%w: %w", ErrBadToken, err)
		}
		p = a.withPolicyRoles(p)
		a.cache.put(sum, p, exp, now)
		p.Roles = slices.Clone(p.Roles)
		return p, nil
	}
	return Principal{}, fmt.Errorf("%w: unknown token", ErrBadToken)
}

// withPolicyRoles merges the policy's roles for p.Subject into a fresh
// slice: the caller may modify what it gets without touching the
// Authenticator's state.
func (a *Authenticator) withPolicyRoles(p Principal) Principal {
	p.Roles = slices.Clone(mergeRoles(p.Roles, a.roles[p.Subject]))
	return p
}

// Realm is the realm of mcpswarm's bearer challenges.
const Realm = "mcpswarm"

// Challenge answers 401 Unauthorized for err (from Authenticate) with an RFC
// 6750 challenge naming the RFC 9728 protected-resource metadata URL:
//
//	WWW-Authenticate: Bearer realm="mcpswarm", resource_metadata="<url>"
//
// plus error="invalid_token" when a token was presented and failed. The JSON
// body is {"error":…,"error_description":…}; it never says why a token failed
// (that detail is for the server's log).
func (a *Authenticator) Challenge(w http.ResponseWriter, err error, resourceMetadataURL string) {
	var b strings.Builder
	b.WriteString(`Bearer realm="` + Realm + `"`)
	if resourceMetadataURL != "" {
		b.WriteString(`, resource_metadata="` + quoteSafe(resourceMetadataURL) + `"`)
	}
	body := map[string]string{"error": "unauthorized", "error_description": "a bearer token is required"}
	if err != nil && !errors.Is(err, ErrNoToken) {
		b.WriteString(`, error="invalid_token", error_description="the bearer token is invalid or expired"`)
		body = map[string]string{"error": "invalid_token", "error_description": "the bearer token is invalid or expired"}
	}
	h := w.Header()
	h.Set("WWW-Authenticate", b.String())
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(body) // the status is sent; a failed write has no one to tell
}

// quoteSafe drops the characters that would end or escape a quoted-string.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// ProtectedResourceMetadata is the RFC 9728 document served at
// /.well-known/oauth-protected-resource.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// WellKnownPath is where ProtectedResourceMetadataHandler is mounted.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// ProtectedResourceMetadataHandler serves the RFC 9728 metadata of resource
// (the MCP endpoint's URL) to GET and HEAD; other methods get 405.
func ProtectedResourceMetadataHandler(resource string, authServers []string, scopes []string) http.Handler {
	doc, err := json.Marshal(ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   authServers,
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcpswarm",
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err != nil { // strings and string slices always marshal; fail visibly if not
			http.Error(w, "marshalling protected-resource metadata failed", http.StatusInternalServerError)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(doc)
	})
}
