package seal

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Errors returned when a 2026-07-28 requestState is refused.
var (
	// ErrStateInvalid marks a requestState that is not ours or was altered.
	ErrStateInvalid = errors.New("seal: invalid request state")
	// ErrStateMismatch marks a requestState presented by another principal,
	// for another tool or with other arguments.
	ErrStateMismatch = errors.New("seal: request state does not match this call")
	// ErrStateExpired marks a requestState past its expiry.
	ErrStateExpired = errors.New("seal: request state expired")
	// ErrStateReplayed marks a requestState that was already used.
	ErrStateReplayed = errors.New("seal: request state already used")
)

const statePrefix = "rs1."

// requestState is the sealed content of a multi-round-trip requestState.
type requestState struct {
	Principal string `json:"p"`
	Tool      string `json:"t"`
	Digest    string `json:"d"`
	Expires   int64  `json:"e"`
	Nonce     string `json:"n"`
}

// stateSealer seals and opens requestState tokens and remembers which nonces
// were used until they expire, so a state is accepted at most once.
type States struct {
	aead cipher.AEAD
	ttl  time.Duration
	now  func() time.Time

	mu   sync.Mutex
	used map[string]time.Time
	// registry, when set, records each nonce cluster-wide
	// (Connections.SpendState), so a state is spent once across nodes.
	registry Spender
}

func NewStates(key []byte, ttl time.Duration) (*States, error) {
	aead, err := labelledAEAD(key, "mcpswarm mcp request state v1")
	if err != nil {
		return nil, fmt.Errorf("creating request state sealer: %w", err)
	}
	return &States{aead: aead, ttl: ttl, now: time.Now, used: make(map[string]time.Time)}, nil
}

// argsDigest is a canonical digest of call arguments (encoding/json sorts
// map keys, so equal maps digest equally).
func argsDigest(args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(fmt.Sprintf("%v", args))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Seal returns a request state for principal's call of tool with args.
func (s *States) Seal(principal, tool string, args map[string]any) string {
	var n [12]byte
	_, _ = rand.Read(n[:])
	st := requestState{
		Principal: principal, Tool: tool, Digest: argsDigest(args),
		Expires: s.now().Add(s.ttl).Unix(), Nonce: hex.EncodeToString(n[:]),
	}
	plain, _ := json.Marshal(st)
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(statePrefix))
	return statePrefix + base64.RawURLEncoding.EncodeToString(sealed)
}

// Open verifies token against the call and consumes it: a state is
// accepted once, across the cluster when a Spender is set.
func (s *States) Open(ctx context.Context, token, principal, tool string, args map[string]any) error {
	rest, ok := strings.CutPrefix(token, statePrefix)
	if !ok || len(rest) > 8192 {
		return ErrStateInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < ns+s.aead.Overhead() {
		return ErrStateInvalid
	}
	plain, err := s.aead.Open(nil, raw[:ns], raw[ns:], []byte(statePrefix))
	if err != nil {
		return ErrStateInvalid
	}
	var st requestState
	if err := json.Unmarshal(plain, &st); err != nil {
		return ErrStateInvalid
	}
	if st.Principal != principal || st.Tool != tool || st.Digest != argsDigest(args) {
		return ErrStateMismatch
	}
	now := s.now()
	exp := time.Unix(st.Expires, 0)
	if now.After(exp) {
		return ErrStateExpired
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, e := range s.used {
		if now.After(e) {
			delete(s.used, n)
		}
	}
	if _, dup := s.used[st.Nonce]; dup {
		return ErrStateReplayed
	}
	if s.registry != nil && s.registry.SpendState(ctx, tool, st.Nonce, exp) {
		return ErrStateReplayed
	}
	s.used[st.Nonce] = exp
	return nil
}

// Spender records a spent request state cluster-wide (the cluster's
// connection registry).
type Spender interface {
	// SpendState records nonce of a state for tool and reports whether it
	// had been spent already.
	SpendState(ctx context.Context, tool, nonce string, expires time.Time) (already bool)
}

// SetSpender makes every Open spend its state through sp, so a state is
// accepted once across nodes; set it before any use.
func (s *States) SetSpender(sp Spender) { s.registry = sp }
