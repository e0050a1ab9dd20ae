package authz

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestPolicyErrors: every validation error is one line naming file:line.
func TestPolicyErrors(t *testing.T) {
	const hash = "270dd18a4b233f64a5e14cb38a001e8d6238aab85b3f8eb36eb6dd3b9e49a141"
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top-level key", "name: x\ntool: []\n",
			`p.yaml:2: unknown key "tool" in policy (allowed: name, tokens, jwt, roles, tools, reads, limits)`},
		{"unknown key in match", "tools:\n  - match: {tool: [a]}\n    allow: true\n",
			`p.yaml:2: unknown key "tool" in match (allowed: principals, roles, tools, transports)`},
		{"methods in a tools rule", "tools:\n  - match: {methods: [tools/list]}\n    allow: true\n",
			`p.yaml:2: unknown key "methods" in match (allowed: principals, roles, tools, transports)`},
		{"unknown action", "tools:\n  - match: {tools: [a]}\n    permit: true\n",
			`p.yaml:3: unknown action or key "permit" in tools rule (want match and one of allow, ask, deny)`},
		{"no action", "tools:\n  - match: {tools: [a]}\n",
			`p.yaml:2: tools rule needs exactly one of allow, ask, deny`},
		{"two actions", "tools:\n  - match: {tools: [a]}\n    allow: true\n    deny: no\n",
			`p.yaml:4: tools rule has both allow and deny; a rule takes exactly one of allow, ask, deny`},
		{"allow false", "tools:\n  - allow: false\n",
			`p.yaml:2: allow: false means nothing; write deny: "<reason>" to deny`},
		{"allow not bool", "tools:\n  - allow: yes\n",
			`p.yaml:2: allow must be true or false, not the string "yes"`},
		{"deny without reason", "tools:\n  - deny: \"\"\n",
			`p.yaml:2: deny takes a non-empty string (the reason given to the client)`},
		{"ask in reads", "reads:\n  - ask: \"ok?\"\n",
			`p.yaml:2: ask is not available in reads rules (a read cannot be approved interactively); use allow or deny`},
		{"bad glob", "tools:\n  - match:\n      tools: [\"a\", \"[ab]\"]\n    allow: true\n",
			`p.yaml:3: match.tools: bad glob "[ab]": character '[' at offset 0 is not allowed (use letters, digits, _ - . / and the wildcards * ?)`},
		{"glob with a space", "tools:\n  - match: {tools: [\"swarm list\"]}\n    allow: true\n",
			`p.yaml:2: match.tools: bad glob "swarm list": character ' ' at offset 5 is not allowed (use letters, digits, _ - . / and the wildcards * ?)`},
		{"unknown read method", "reads:\n  - match: {methods: [resources/lsit]}\n    allow: true\n",
			`p.yaml:2: match.methods: unknown read method "resources/lsit" (known: tools/list, resources/list, resources/templates/list, resources/read, resources/subscribe, resources/unsubscribe, prompts/list, prompts/get, completion/complete, logging/setLevel)`},
		{"unknown transport", "tools:\n  - match: {transports: [http]}\n    allow: true\n",
			`p.yaml:2: match.transports: unknown transport "http" (known: stdio, sse, streamable-http)`},
		{"empty match list", "tools:\n  - match: {tools: []}\n    allow: true\n",
			`p.yaml:2: match.tools is an empty list, which matches nothing; leave the key out to match any`},
		{"tools null", "tools:\n",
			`p.yaml:1: tools must be a list of rules (an empty list [] denies everything), not null`},
		{"duplicate token", "tokens:\n  - sha256: \"" + hash + "\"\n    subject: a\n  - sha256: \"" + strings.ToUpper(hash) + "\"\n    subject: b\n",
			`p.yaml:4: duplicate token (same sha256 as the token at line 2)`},
		{"short hash", "tokens:\n  - sha256: abc\n    subject: a\n",
			`p.yaml:2: sha256 must be 64 hexadecimal digits (the SHA-256 of the token)`},
		{"token without subject", "tokens:\n  - sha256: \"" + hash + "\"\n",
			`p.yaml:2: token needs subject`},
		{"reserved subject", "tokens:\n  - sha256: \"" + hash + "\"\n    subject: conn:abc\n",
			`p.yaml:3: subject "conn:abc" is reserved for unauthenticated principals`},
		{"stdio subject", "tokens:\n  - sha256: \"" + hash + "\"\n    subject: stdio\n",
			`p.yaml:3: subject "stdio" is reserved for unauthenticated principals`},
		{"bad role", "roles:\n  bob: [\"ad min\"]\n",
			`p.yaml:2: bad role "ad min" (use 1-64 of A-Z a-z 0-9 _ . : -)`},
		{"duplicate key", "name: a\nname: b\n",
			`p.yaml:2: duplicate key "name" in policy (first at line 1)`},
		{"duplicate match", "tools:\n  - match: {}\n    match: {}\n    allow: true\n",
			`p.yaml:3: duplicate key "match" in tools rule (first at line 2)`},
		{"limits unknown", "limits: {calls_per_minute: 3}\n",
			`p.yaml:1: unknown key "calls_per_minute" in limits (allowed: sessions_per_principal, calls_per_second, call_burst, client_facts_bytes, initializes_per_minute, session_state_bytes, connections_per_principal)`},
		{"limits negative", "limits:\n  call_burst: -1\n",
			`p.yaml:2: limits.call_burst must be a whole number from 0 to 2147483647, not -1`},
		{"state bytes negative", "limits:\n  session_state_bytes: -1\n",
			`p.yaml:2: limits.session_state_bytes must be a whole number from 0 to 2147483647, not -1`},
		{"state bytes not a number", "limits:\n  session_state_bytes: 1MiB\n",
			`p.yaml:2: limits.session_state_bytes must be a whole number, not the string "1MiB"`},
		{"limits string", "limits:\n  calls_per_second: fast\n",
			`p.yaml:2: limits.calls_per_second must be a number, not the string "fast"`},
		{"anchor", "tools:\n  - &r {allow: true}\n  - *r\n",
			`p.yaml:2: anchors and aliases are not supported in a policy`},
		{"two documents", "name: a\n---\nname: b\n",
			`p.yaml:2: a policy is one YAML document; found another`},
		{"empty", "",
			`p.yaml: policy is empty`},
		{"comment only", "# nothing\n",
			`p.yaml: policy is empty`},
		{"not a mapping", "- a\n",
			`p.yaml:1: policy must be a mapping, not a list`},
		{"syntax error", "name: x\ntools:\n\t- allow: true\n",
			`p.yaml:3: syntax error: found character that cannot start any token`},
		{"jwt without key source", "jwt:\n  issuer: i\n  audience: a\n",
			`p.yaml:1: jwt needs one key source: hs256_secret_file, public_keys or jwks_file`},
		{"jwt two sources", "jwt:\n  issuer: i\n  audience: a\n  jwks_file: a.json\n  hs256_secret_file: s\n",
			`p.yaml:5: jwt has both jwks_file and hs256_secret_file; give exactly one key source`},
		{"jwt without issuer", "jwt:\n  audience: a\n  jwks_file: a.json\n",
			`p.yaml:1: jwt needs issuer`},
		{"jwt leeway", "jwt:\n  issuer: i\n  audience: a\n  leeway: 1h\n  jwks_file: a.json\n",
			`p.yaml:4: jwt.leeway must be a duration from 0s to 5m0s, not "1h"`},
		{"jwt unknown key", "jwt:\n  issuer: i\n  algs: [none]\n",
			`p.yaml:3: unknown key "algs" in jwt (allowed: issuer, audience, leeway, hs256_secret_file, public_keys, jwks_file)`},
		{"jwt missing key file", "jwt:\n  issuer: i\n  audience: a\n  jwks_file: /nonexistent/keys.json\n",
			`p.yaml:4: jwt.jwks_file: reading key file: open /nonexistent/keys.json: no such file or directory`},
		{"task on a deny rule", "tools:\n  - match: {tools: [slow]}\n    deny: no\n    task: optional\n",
			`p.yaml:4: task on a deny rule means nothing (a denied call never runs); put it on an allow or ask rule`},
		{"unknown task mark", "tools:\n  - allow: true\n    task: sometimes\n",
			`p.yaml:3: task must be optional, required or forbidden, not "sometimes"`},
		{"task not a string", "tools:\n  - allow: true\n    task: [optional]\n",
			`p.yaml:3: task must be a string, not a list`},
		{"task in reads", "reads:\n  - allow: true\n    task: optional\n",
			`p.yaml:3: task is not available in reads rules (only a tool call can run as a task)`},
		{"task twice", "tools:\n  - allow: true\n    task: optional\n    task: required\n",
			`p.yaml:4: duplicate key "task" in tools rule (first at line 3)`},
		{"control character in a reason", "tools:\n  - deny: \"bad\\u202e\"\n",
			`p.yaml:2: deny: character U+202E at offset 3 is not printable`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePolicy("p.yaml", []byte(tc.yaml), "/", os.ReadFile)
			if err == nil {
				t.Fatalf("parsed; want error %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.File != "p.yaml" {
				t.Errorf("error is not a *PolicyError for p.yaml: %#v", err)
			}
		})
	}
}

func TestPolicyTooLarge(t *testing.T) {
	data := []byte("name: x\n" + strings.Repeat("#", MaxPolicyBytes))
	if _, err := ParsePolicy("big.yaml", data); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized policy: %v", err)
	}
}
