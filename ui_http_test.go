package mcpswarm_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/ui"
)

// uiClient speaks to one node's /ui over HTTP, without following redirects.
type uiClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newUIClient(t *testing.T, n *mcpswarm.Node) *uiClient {
	return &uiClient{t: t, base: "http://" + n.HTTPAddr(), hc: &http.Client{
		Transport:     httpTransport(n),
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (c *uiClient) do(method, path, body string, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, string(b)
}

var csrfAttr = regexp.MustCompile(`data-csrf="([^"]+)"`)

// login posts the token to the login form and returns the cookie header
// and the CSRF token of the swarm page.
func (c *uiClient) login(token string) (cookie, csrf string) {
	c.t.Helper()
	form := url.Values{"token": {token}, "next": {"/ui/"}}.Encode()
	resp, _ := c.do(http.MethodPost, "/ui/login", form, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		c.t.Fatalf("login: HTTP %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == ui.CookieName {
			ck = k
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" {
		c.t.Fatalf("login cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui", ck)
	}
	cookie = ck.Name + "=" + ck.Value
	_, page := c.do(http.MethodGet, "/ui/", "", map[string]string{"Cookie": cookie})
	m := csrfAttr.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("the swarm page carries no CSRF token:\n%s", page)
	}
	return cookie, m[1]
}

// TestUIAuthentication checks the UI's boundary in process: login into an
// HttpOnly SameSite=Strict cookie, refusals of bad tokens, missing CSRF
// tokens and cross-origin posts, ownership (403 with nothing of the
// session), the admin role, and bounds on the action body.
func TestUIAuthentication(t *testing.T) {
	e := newSwarmEnv(t)
	n := e.cluster(1)[0]
	alice := connect(t, n, connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "login", "id": "uiauth"}); res.IsError {
		t.Fatalf("swarm_start: %s", textOf(res))
	}
	c := newUIClient(t, n)

	// Unauthenticated: pages redirect to the login page, the API says 401.
	if resp, _ := c.do(http.MethodGet, "/ui/sessions/uiauth", "", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?next=") {
		t.Errorf("anonymous session page: HTTP %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := c.do(http.MethodGet, "/ui/api/swarm", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous swarm stream: HTTP %d, want 401", resp.StatusCode)
	}
	if resp, body := c.do(http.MethodPost, "/ui/login", "token=not-a-token", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(body, "did not verify") {
		t.Errorf("login with a bad token: HTTP %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := c.do(http.MethodGet, "/ui/", "", map[string]string{"Cookie": ui.CookieName + "=forged"}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a forged cookie: HTTP %d, want the login redirect", resp.StatusCode)
	}

	aliceCookie, aliceCSRF := c.login(aliceToken)
	bobCookie, bobCSRF := c.login(bobToken)
	adaCookie, _ := c.login(adaToken)
	if aliceCSRF == bobCSRF {
		t.Fatal("two logins got the same CSRF token")
	}

	// Ownership: bob gets 403 and nothing of alice's session; ada (admin) and alice see it.
	resp, body := c.do(http.MethodGet, "/ui/sessions/uiauth", "", map[string]string{"Cookie": bobCookie})
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "alice") || strings.Contains(body, "login") && strings.Contains(body, "data-session") {
		t.Errorf("bob's session page: HTTP %d\n%s", resp.StatusCode, body)
	}
	missing, _ := c.do(http.MethodGet, "/ui/sessions/nosuch", "", map[string]string{"Cookie": bobCookie})
	if missing.StatusCode != http.StatusForbidden {
		t.Errorf("a session that does not exist: HTTP %d, want the same 403 as someone else's", missing.StatusCode)
	}
	for who, ck := range map[string]string{"alice": aliceCookie, "ada": adaCookie} {
		if resp, _ := c.do(http.MethodGet, "/ui/sessions/uiauth", "", map[string]string{"Cookie": ck}); resp.StatusCode != http.StatusOK {
			t.Errorf("%s's session page: HTTP %d, want 200", who, resp.StatusCode)
		}
	}
	if first := firstEvent(t, c.hc, c.base+"/ui/api/swarm", bobCookie); strings.Contains(first, "uiauth") {
		t.Errorf("bob's swarm stream shows alice's session: %s", first)
	}
	if first := firstEvent(t, c.hc, c.base+"/ui/api/swarm", adaCookie); !strings.Contains(first, `"id":"uiauth"`) || !strings.Contains(first, `"owner":"alice"`) {
		t.Errorf("the admin's swarm stream lacks alice's session: %s", first)
	}

	act := func(cookie, csrf, origin, body string) int {
		h := map[string]string{"Cookie": cookie, "Content-Type": "application/json"}
		if csrf != "" {
			h[ui.CSRFHeader] = csrf
		}
		if origin != "" {
			h["Origin"] = origin
		}
		resp, _ := c.do(http.MethodPost, "/ui/api/sessions/uiauth/act", body, h)
		return resp.StatusCode
	}
	typeDemo := `{"widget":"username","action":"type_into","args":{"text":"demo"}}`
	for _, tc := range []struct {
		name                       string
		cookie, csrf, origin, body string
		want                       int
	}{
		{"no CSRF token", aliceCookie, "", "", typeDemo, http.StatusForbidden},
		{"another login's CSRF token", aliceCookie, bobCSRF, "", typeDemo, http.StatusForbidden},
		{"a cross-origin post", aliceCookie, aliceCSRF, "http://evil.example", typeDemo, http.StatusForbidden},
		{"bob on alice's session", bobCookie, bobCSRF, "", typeDemo, http.StatusForbidden},
		{"not JSON", aliceCookie, aliceCSRF, "", `widget=username`, http.StatusBadRequest},
		{"over 64 KiB", aliceCookie, aliceCSRF, "", `{"widget":"username","action":"type_into","args":{"text":"` + strings.Repeat("x", 70<<10) + `"}}`, http.StatusBadRequest},
		{"not an id", aliceCookie, aliceCSRF, "", `{"widget":"../x","action":"click"}`, http.StatusBadRequest},
		{"a widget the view lacks", aliceCookie, aliceCSRF, "", `{"widget":"nosuch","action":"click"}`, http.StatusConflict},
		{"alice types", aliceCookie, aliceCSRF, c.base, typeDemo, http.StatusOK},
	} {
		if got := act(tc.cookie, tc.csrf, tc.origin, tc.body); got != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.name, got, tc.want)
		}
	}
	model := textOf(alice.call("swarm_get_model", map[string]any{"id": "uiauth"}))
	if !strings.Contains(model, `"username":"demo"`) {
		t.Fatalf("after the page typed, the agent reads %s", model)
	}
}

// firstEvent returns the first data line of an SSE stream.
func firstEvent(t *testing.T, hc *http.Client, url, cookie string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Cookie", cookie)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return line
		}
	}
	t.Fatalf("GET %s: no event", url)
	return ""
}
