package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpswarm/mcpswarm/authz"
)

// CookieName is the cookie holding the bearer token the person logged in
// with. It is HttpOnly (no script reads it) and SameSite=Strict (no other
// site's page sends it).
const CookieName = "mcpswarm_ui"

// CSRFHeader carries the page's CSRF token on every action.
const CSRFHeader = "X-CSRF-Token"

// DevSubject is the principal of the page under --dev when no token is
// configured: the operator at the loopback console, with the admin role so
// the page shows every session (the dev policy allows every call anyway).
const DevSubject = "dev-console"

var (
	errLoginRequired = errors.New("log in with a bearer token")
	errNoCredentials = errors.New("the UI needs bearer-token authentication: configure tokens or a JWT key set in the policy (or run with --dev on loopback)")
)

// identify returns the principal of r: a verified bearer token from the
// Authorization header or the login cookie; under --dev with no
// authenticator, the dev console. The token (or "") is returned for the
// CSRF binding.
func (h *Handler) identify(r *http.Request) (authz.Principal, string, error) {
	a := h.cfg.Guard.Authenticator
	if a == nil || !a.Required() {
		if h.cfg.Dev {
			return h.cfg.Guard.Principal(authz.Principal{Subject: DevSubject, Roles: []string{authz.RoleAdmin}}), "", nil
		}
		return authz.Principal{}, "", errNoCredentials
	}
	if r.Header.Get("Authorization") != "" {
		p, err := a.Authenticate(r)
		if err != nil {
			return authz.Principal{}, "", err
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return p, strings.TrimSpace(tok), nil
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return authz.Principal{}, "", errLoginRequired
	}
	p, err := a.Verify(ck.Value)
	if err != nil {
		return authz.Principal{}, "", err
	}
	return p, ck.Value, nil
}

// csrfToken binds a CSRF token to the credential: a page served to one
// login cannot act for another, and nothing but a page this node (or a
// node sharing the cluster key) rendered knows it.
func (h *Handler) csrfToken(credential string) string {
	m := hmac.New(sha256.New, h.cfg.Key)
	m.Write([]byte("mcpswarm ui csrf\x00"))
	m.Write([]byte(credential))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *Handler) checkCSRF(r *http.Request, credential string) bool {
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && hmac.Equal([]byte(got), []byte(h.csrfToken(credential)))
}

// sameOrigin refuses a state-changing request whose Origin is another site,
// and any request that reached a loopback listener under a non-loopback
// Host (a DNS-rebinding page).
func sameOrigin(r *http.Request) error {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil && loopback(local.String()) && !loopback(r.Host) {
		return errors.New("invalid Host header for a loopback listener")
	}
	if o := r.Header.Get("Origin"); o != "" && r.Method != http.MethodGet {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return errors.New("cross-origin request refused")
		}
	}
	return nil
}

// loopback is authz.IsLoopback for a Host header or listener address; an
// unknown host name is not loopback.
func loopback(hostport string) bool {
	ok, _ := authz.IsLoopback(hostport)
	return ok
}

// serveLogin takes a bearer token from the login form, verifies it, and
// stores it in the cookie.
func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	a := h.cfg.Guard.Authenticator
	open := a == nil || !a.Required()
	if r.Method == http.MethodGet {
		if open && h.cfg.Dev {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther) // nothing to sign in with
			return
		}
		h.page(w, r, pageLogin, http.StatusOK, pageData{})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		h.page(w, r, pageLogin, http.StatusBadRequest, pageData{Error: "The form could not be read."})
		return
	}
	if open {
		h.page(w, r, pageLogin, http.StatusForbidden, pageData{Error: errNoCredentials.Error()})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	p, err := a.Verify(tok)
	if err != nil {
		h.log.Info("UI login refused", "err", err)
		h.page(w, r, pageLogin, http.StatusUnauthorized, pageData{Error: "That token did not verify."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: tok, Path: "/ui",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	h.log.Info("UI login", "principal", p.Subject)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (h *Handler) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/ui", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect inside /ui.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "/ui//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/ui/"
}
