package authz

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxPolicyBytes bounds the size of a policy file.
const MaxPolicyBytes = 1 << 20

// Policy is a parsed, validated policy file: tokens, JWT settings, roles by
// subject, ordered tool and read rules, and limits. It is immutable and safe
// for concurrent use; it implements Authorizer and ReadAuthorizer.
type Policy struct {
	file     string
	name     string
	tokens   []staticToken
	jwt      *jwtVerifier
	roles    map[string][]string
	tools    []rule
	hasTools bool
	reads    []rule
	hasReads bool
	limits   Limits
}

// Name is the policy's name: its name key, or the file's base name.
func (p *Policy) Name() string { return p.name }

// File is the file name the policy was loaded from (as given).
func (p *Policy) File() string { return p.file }

// Limits are the policy's per-principal limits.
func (p *Policy) Limits() Limits { return p.limits }

// HasToolRules reports whether the policy has a tools section (an empty list
// counts: it denies every tool).
func (p *Policy) HasToolRules() bool { return p.hasTools }

// HasReadRules reports whether the policy has a reads section (an empty list
// counts: it denies every read).
func (p *Policy) HasReadRules() bool { return p.hasReads }

// RolesFor returns the policy's extra roles for subject.
func (p *Policy) RolesFor(subject string) []string { return slices.Clone(p.roles[subject]) }

// Guard is the guard this policy configures. A section the file has is
// SourceConfigured; a missing tools or reads section leaves the framework
// default (SourceDefault) in its place, which a network transport refuses.
// The Authenticator is built from the tokens and jwt sections (nil when the
// policy has neither).
func (p *Policy) Guard() (Guard, error) {
	if p == nil {
		return Guard{}, errors.New("authz: nil policy")
	}
	g := DefaultGuard()
	g.Name = p.name
	g.Limits = p.limits
	g.roles = p.roles
	if p.hasTools {
		g.Tools, g.ToolsSource = p, SourceConfigured
	}
	if p.hasReads {
		g.Reads, g.ReadsSource = p, SourceConfigured
	}
	if len(p.tokens) > 0 || p.jwt != nil {
		g.Authenticator = &Authenticator{tokens: p.tokens, jwt: p.jwt, roles: p.roles}
		if p.jwt != nil {
			g.Authenticator.cache = newJWTCache()
		}
	}
	return g, nil
}

// LoadPolicyFile reads and parses the policy at path. Relative key-file paths
// in it resolve against the policy's directory. Errors name path:line.
func LoadPolicyFile(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading policy %s: %w", path, err)
	}
	return parsePolicy(path, data, filepath.Dir(path), os.ReadFile)
}

// ParsePolicy parses a policy document; name stands for the file in errors
// and rule names. Relative key-file paths resolve against the working
// directory.
func ParsePolicy(name string, data []byte) (*Policy, error) {
	return parsePolicy(name, data, ".", os.ReadFile)
}

// readFileFunc reads a key file; tests and fuzzing substitute it.
type readFileFunc func(path string) ([]byte, error)

func parsePolicy(file string, data []byte, dir string, readFile readFileFunc) (*Policy, error) {
	r := &nodeReader{file: file}
	if len(data) > MaxPolicyBytes {
		return nil, r.errf(nil, "policy is larger than %d bytes", MaxPolicyBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, r.errf(nil, "policy is empty")
		}
		return nil, yamlSyntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, r.errf(&extra, "a policy is one YAML document; found another")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, r.errf(&doc, "policy is empty")
	}
	root := doc.Content[0]
	if err := r.noAnchors(root); err != nil {
		return nil, err
	}
	fields, err := r.mapping(root, "policy", "name", "tokens", "jwt", "roles", "tools", "reads", "limits")
	if err != nil {
		return nil, err
	}
	p := &Policy{file: file, name: strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), roles: map[string][]string{}}
	for _, f := range fields {
		switch f.key {
		case "name":
			p.name, err = r.nonEmptyStr(f.value, "name")
			if err == nil {
				err = printableAt(r, f.value, "name", p.name)
			}
		case "tokens":
			p.tokens, err = r.tokens(f.value)
		case "jwt":
			p.jwt, err = r.jwt(f.keyN, f.value, dir, readFile)
		case "roles":
			p.roles, err = r.roleMap(f.value)
		case "tools":
			p.tools, err = r.rules(f.value, surfaceTools)
			p.hasTools = true
		case "reads":
			p.reads, err = r.rules(f.value, surfaceReads)
			p.hasReads = true
		case "limits":
			p.limits, err = r.limits(f.value)
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func printableAt(r *nodeReader, n *yaml.Node, what, s string) error {
	if err := printable(s); err != nil {
		return r.errf(n, "%s: %v", what, err)
	}
	return nil
}

// staticToken is one static bearer token: its SHA-256 and who it stands for.
type staticToken struct {
	hash    [sha256.Size]byte
	subject string
	roles   []string
	line    int
}

var roleRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// maxSubjectLen bounds a subject, from a policy or a token.
const maxSubjectLen = 256

// validSubject checks a token subject: printable, bounded, and outside the
// unauthenticated namespace ("stdio", "conn:…").
func validSubject(s string) error {
	switch {
	case s == "":
		return errors.New("subject is empty")
	case len(s) > maxSubjectLen:
		return fmt.Errorf("subject is longer than %d bytes", maxSubjectLen)
	case reservedSubject(s):
		return fmt.Errorf("subject %q is reserved for unauthenticated principals", s)
	}
	if err := printable(s); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	return nil
}

func (r *nodeReader) tokens(n *yaml.Node) ([]staticToken, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, r.errf(n, "tokens must be a list, not %s", kindName(n))
	}
	var out []staticToken
	for _, item := range n.Content {
		fields, err := r.mapping(item, "token", "sha256", "subject", "roles")
		if err != nil {
			return nil, err
		}
		t := staticToken{line: item.Line}
		var haveHash bool
		for _, f := range fields {
			switch f.key {
			case "sha256":
				s, err := r.str(f.value, "sha256")
				if err != nil {
					return nil, err
				}
				b, err := hex.DecodeString(strings.ToLower(s))
				if err != nil || len(b) != sha256.Size {
					return nil, r.errf(f.value, "sha256 must be 64 hexadecimal digits (the SHA-256 of the token)")
				}
				copy(t.hash[:], b)
				haveHash = true
			case "subject":
				s, err := r.str(f.value, "subject")
				if err != nil {
					return nil, err
				}
				if err := validSubject(s); err != nil {
					return nil, r.errf(f.value, "%v", err)
				}
				t.subject = s
			case "roles":
				if t.roles, err = r.roleList(f.value); err != nil {
					return nil, err
				}
			}
		}
		if !haveHash {
			return nil, r.errf(item, "token needs sha256")
		}
		if t.subject == "" {
			return nil, r.errf(item, "token needs subject")
		}
		for _, prev := range out {
			if prev.hash == t.hash {
				return nil, r.errf(item, "duplicate token (same sha256 as the token at line %d)", prev.line)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func (r *nodeReader) roleList(n *yaml.Node) ([]string, error) {
	roles, err := r.strList(n, "roles")
	if err != nil {
		return nil, err
	}
	for i, role := range roles {
		if !roleRE.MatchString(role) {
			return nil, r.errf(n.Content[i], "bad role %q (use 1-64 of A-Z a-z 0-9 _ . : -)", role)
		}
	}
	return slices.Compact(roles), nil
}

func (r *nodeReader) roleMap(n *yaml.Node) (map[string][]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, r.errf(n, "roles must be a mapping of subject to roles, not %s", kindName(n))
	}
	out := map[string][]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		subject, err := r.nonEmptyStr(k, "roles subject")
		if err != nil {
			return nil, err
		}
		if err := printableAt(r, k, "roles subject", subject); err != nil {
			return nil, err
		}
		if _, dup := out[subject]; dup {
			return nil, r.errf(k, "duplicate subject %q in roles", subject)
		}
		if out[subject], err = r.roleList(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *nodeReader) limits(n *yaml.Node) (Limits, error) {
	fields, err := r.mapping(n, "limits", "sessions_per_principal", "calls_per_second", "call_burst", "client_facts_bytes", "initializes_per_minute", "session_state_bytes", "connections_per_principal")
	if err != nil {
		return Limits{}, err
	}
	var l Limits
	for _, f := range fields {
		switch f.key {
		case "sessions_per_principal":
			l.SessionsPerPrincipal, err = r.nonNegInt(f.value, "limits.sessions_per_principal")
		case "calls_per_second":
			l.CallsPerSecond, err = r.nonNegFloat(f.value, "limits.calls_per_second")
		case "call_burst":
			l.CallBurst, err = r.nonNegInt(f.value, "limits.call_burst")
		case "client_facts_bytes":
			l.ClientFactsBytes, err = r.nonNegInt(f.value, "limits.client_facts_bytes")
		case "initializes_per_minute":
			l.InitializesPerMinute, err = r.nonNegInt(f.value, "limits.initializes_per_minute")
		case "session_state_bytes":
			l.SessionStateBytes, err = r.nonNegInt(f.value, "limits.session_state_bytes")
		case "connections_per_principal":
			l.ConnectionsPerPrincipal, err = r.nonNegInt(f.value, "limits.connections_per_principal")
		}
		if err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlSyntaxError turns "yaml: line 3: msg" into "<file>:3: msg".
func yamlSyntaxError(file string, err error) error {
	msg := oneLine(err.Error())
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &PolicyError{File: file, Line: line, Msg: "syntax error: " + m[2]}
	}
	return &PolicyError{File: file, Msg: "syntax error: " + strings.TrimPrefix(msg, "yaml: ")}
}
