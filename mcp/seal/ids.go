package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// Errors returned by SessionIDs.Open. Both make the transport answer 404.
var (
	// ErrSessionIDInvalid marks an Mcp-Session-Id nobody in the cluster
	// minted (forged, tampered, truncated or sealed with another key).
	ErrSessionIDInvalid = errors.New("seal: invalid session id")
	// ErrSessionIDPrincipal marks a valid Mcp-Session-Id presented by a
	// principal other than the one it is bound to.
	ErrSessionIDPrincipal = errors.New("seal: session id bound to another principal")
	// ErrSessionIDExpired marks an Mcp-Session-Id older than the maximum
	// age (see SessionIDs.SetMaxAge): the client must initialize again.
	ErrSessionIDExpired = errors.New("seal: session id expired")
)

// SerialPrefix starts a serial id (see SessionIDs.Serial).
const SerialPrefix = "s2."

const (
	sidPrefix  = "s1."
	sidVersion = 1
	// serialPrefix starts a serial id (version 2): one that carries, beside
	// its sealed claims, a serial the cluster can revoke in blocks (see
	// Serial).
	serialPrefix  = SerialPrefix
	serialVersion = 2
	// serialLen is the size of a serial id's enciphered serial, ahead of
	// its nonce.
	serialLen = 16
	// maxTerminated bounds the node-local set of ids ended by DELETE.
	maxTerminated = 65536
	// maxTerminatedClustered bounds it when the cluster keeps the
	// revocations (SessionIDs.cluster is set): the set then only carries
	// a DELETE until the revocation the front writes right after is in
	// force, so it need not hold a week of ended connections.
	maxTerminatedClustered = 1024
)

// SessionIDs mints and validates sealed Streamable HTTP session ids. An id
// is AES-GCM sealed under a key the whole cluster shares, names the node
// that minted it and, when the request was authenticated, the principal it
// is bound to, so every node validates every id and nobody can forge one.
type SessionIDs struct {
	aead cipher.AEAD
	node string
	now  func() time.Time
	// serials enciphers a serial id's serial (one AES block) under its own
	// key, so a client learns nothing from it (not how many ids its node
	// minted) while every node reads it without opening the whole id.
	serials cipher.Block
	// epoch and seq are the next serial: epoch is drawn at random when the
	// sealer is made and again when seq wraps, so no two ids of a cluster
	// share a serial.
	serialMu sync.Mutex
	epoch    uint64
	seq      uint32

	mu sync.RWMutex
	// terminated holds hashes of the ids DELETEd here (seeded per node:
	// node-local, so no one can aim a collision), oldest first in order:
	// at most maxTerminated, 8 bytes each rather than the ~105-byte id,
	// and checked on every request without allocating.
	seed       maphash.Seed
	terminated map[uint64]struct{}
	// cluster, when set, keeps the revocations of the whole cluster and
	// says whether serial ids may be minted; nil on a lone node.
	cluster Revocations
	maxAge  time.Duration
	order   []uint64
}

// hashOf is id's key in the terminated set.
func (s *SessionIDs) hashOf(id string) uint64 { return maphash.String(s.seed, id) }

// SessionClaims is what a sealed session id carries.
type SessionClaims struct {
	// Node is the node that minted the id (the connection's home node).
	Node string
	// Principal is the subject the id is bound to; "" when the connection
	// was opened without authentication.
	Principal string
	// Issued is when the id was minted.
	Issued time.Time
}

// NewSessionIDs returns a sealer for ids minted by node. key must be 32
// bytes (the cluster's "mcp-session-id" key).
func NewSessionIDs(key []byte, node string) (*SessionIDs, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("creating session id sealer: key must be 32 bytes, got %d", len(key))
	}
	if node == "" || len(node) > 255 {
		return nil, fmt.Errorf("creating session id sealer: node name must be 1-255 bytes")
	}
	aead, err := labelledAEAD(key, "mcpswarm mcp session id v1")
	if err != nil {
		return nil, fmt.Errorf("creating session id sealer: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("mcpswarm mcp session id serial v2"))
	serials, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("creating session id sealer: %w", err)
	}
	return &SessionIDs{aead: aead, serials: serials, node: node, now: time.Now, seed: maphash.MakeSeed(),
		terminated: make(map[uint64]struct{}), epoch: randomEpoch()}, nil
}

func randomEpoch() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// IDSerial is a serial id's serial: the epoch of the sealer that minted it
// (8 bytes) and its sequence number in that epoch (4), big-endian. Ids of
// one epoch are numbered in order, so the revocations of a node's ids
// cluster into blocks of neighbouring serials.
type IDSerial [12]byte

// nextSerial returns the serial of the next id.
func (s *SessionIDs) nextSerial() IDSerial {
	s.serialMu.Lock()
	defer s.serialMu.Unlock()
	if s.seq == ^uint32(0) {
		s.epoch, s.seq = randomEpoch(), 0
	}
	var out IDSerial
	binary.BigEndian.PutUint64(out[:8], s.epoch)
	binary.BigEndian.PutUint32(out[8:], s.seq)
	s.seq++
	return out
}

// SetCluster makes the ids answer to the cluster's revocations, and mint
// serial ids only while it allows them. The front sets it before the
// sealer is shared.
func (s *SessionIDs) SetCluster(r Revocations) {
	s.mu.Lock()
	s.cluster = r
	s.mu.Unlock()
}

// SerialReader returns what reads the serials of ids sealed under key (the
// cluster's session key; see Serial), for a node that revokes them by
// serial.
func SerialReader(key []byte) (func(id string) (IDSerial, bool), error) {
	ids, err := NewSessionIDs(key, "serial-reader")
	if err != nil {
		return nil, err
	}
	return ids.Serial, nil
}

// Serial returns id's serial when id is a serial id of this cluster's
// form. It deciphers one block and does not authenticate the id: call it
// on ids Open accepted, or on ids the cluster itself recorded.
func (s *SessionIDs) Serial(id string) (IDSerial, bool) {
	rest, ok := strings.CutPrefix(id, serialPrefix)
	// 24 characters of unpadded base64 are 18 bytes, the first 16 of them
	// the enciphered serial.
	if !ok || len(rest) < 24 {
		return IDSerial{}, false
	}
	var raw [18]byte
	if n, err := base64.RawURLEncoding.Decode(raw[:], []byte(rest[:24])); err != nil || n != len(raw) {
		return IDSerial{}, false
	}
	var block [serialLen]byte
	s.serials.Decrypt(block[:], raw[:serialLen])
	if binary.BigEndian.Uint32(block[12:]) != 0 {
		return IDSerial{}, false
	}
	return IDSerial(block[:12]), true
}

// Mint seals a new id naming this node, bound to principal ("" for none):
// a serial id unless the cluster said a node does not read those yet.
func (s *SessionIDs) Mint(principal string) string {
	if len(principal) > 1024 {
		principal = principal[:1024]
	}
	if s.cluster == nil || s.cluster.MintSerial() {
		return s.mintSerialID(principal)
	}
	plain := make([]byte, 0, 1+1+len(s.node)+2+len(principal)+8+16)
	plain = append(plain, sidVersion, byte(len(s.node)))
	plain = append(plain, s.node...)
	plain = binary.BigEndian.AppendUint16(plain, uint16(len(principal)))
	plain = append(plain, principal...)
	plain = binary.BigEndian.AppendUint64(plain, uint64(s.now().Unix()))
	var salt [16]byte
	_, _ = rand.Read(salt[:])
	plain = append(plain, salt[:]...)
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(sidPrefix))
	return sidPrefix + base64.RawURLEncoding.EncodeToString(sealed)
}

// mintSerialID seals a serial id: "s2." and, base64url, the serial
// enciphered (16 bytes: the serial and four zero bytes, one AES block),
// the nonce, and the claims sealed with the prefix and the enciphered
// serial as additional data (so neither can be swapped). The claims carry
// no salt: the serial makes every id unique.
func (s *SessionIDs) mintSerialID(principal string) string {
	plain := make([]byte, 0, 1+1+len(s.node)+2+len(principal)+8)
	plain = append(plain, serialVersion, byte(len(s.node)))
	plain = append(plain, s.node...)
	plain = binary.BigEndian.AppendUint16(plain, uint16(len(principal)))
	plain = append(plain, principal...)
	plain = binary.BigEndian.AppendUint64(plain, uint64(s.now().Unix()))
	serial := s.nextSerial()
	ns := s.aead.NonceSize()
	raw := make([]byte, serialLen+ns, serialLen+ns+len(plain)+s.aead.Overhead())
	var block [serialLen]byte
	copy(block[:], serial[:])
	s.serials.Encrypt(raw[:serialLen], block[:])
	_, _ = rand.Read(raw[serialLen:])
	ad := append([]byte(serialPrefix), raw[:serialLen]...)
	raw = s.aead.Seal(raw, raw[serialLen:], plain, ad)
	return serialPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// Open validates id and returns its claims. principal is the authenticated
// subject presenting the id ("" for none); an id bound to a principal must
// be presented by that principal.
func (s *SessionIDs) Open(id, principal string) (SessionClaims, error) {
	c, err := s.Claims(id)
	if err != nil {
		return SessionClaims{}, err
	}
	s.mu.RLock()
	maxAge := s.maxAge
	s.mu.RUnlock()
	if maxAge > 0 && s.now().Sub(c.Issued) > maxAge {
		return SessionClaims{}, ErrSessionIDExpired
	}
	if s.cluster != nil {
		// Issued is in whole seconds, at or before the true issue time.
		if f := s.cluster.RevokedBefore(); !f.IsZero() && !c.Issued.After(f) {
			return SessionClaims{}, ErrSessionIDExpired
		}
	}
	if c.Principal != principal {
		return SessionClaims{}, ErrSessionIDPrincipal
	}
	return c, nil
}

func (s *SessionIDs) Claims(id string) (SessionClaims, error) {
	if rest, ok := strings.CutPrefix(id, serialPrefix); ok {
		return s.openSerial(rest)
	}
	rest, ok := strings.CutPrefix(id, sidPrefix)
	if !ok || len(rest) > 4096 {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	ns := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:ns], raw[ns:], []byte(sidPrefix))
	if err != nil {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	return parseClaims(plain, sidVersion)
}

// openSerial opens a serial id (rest: what follows its prefix).
func (s *SessionIDs) openSerial(rest string) (SessionClaims, error) {
	if len(rest) > 4096 {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < serialLen+ns+s.aead.Overhead() {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	var ad [len(serialPrefix) + serialLen]byte
	copy(ad[:], serialPrefix)
	copy(ad[len(serialPrefix):], raw[:serialLen])
	plain, err := s.aead.Open(nil, raw[serialLen:serialLen+ns], raw[serialLen+ns:], ad[:])
	if err != nil {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	return parseClaims(plain, serialVersion)
}

// parseClaims reads the sealed claims of an id of version: a version-1
// id's end with a 16-byte salt, a serial id's without.
func parseClaims(p []byte, version byte) (SessionClaims, error) {
	if len(p) < 2 || p[0] != version {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	salt := 16
	if version == serialVersion {
		salt = 0
	}
	n := int(p[1])
	p = p[2:]
	if len(p) < n+2 {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	node := string(p[:n])
	p = p[n:]
	pl := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	if len(p) != pl+8+salt {
		return SessionClaims{}, ErrSessionIDInvalid
	}
	principal := string(p[:pl])
	issued := time.Unix(int64(binary.BigEndian.Uint64(p[pl:])), 0)
	return SessionClaims{Node: node, Principal: principal, Issued: issued}, nil
}

// Terminated reports whether id was ended by a DELETE on this node, or, when
// the front is part of a cluster (Connections.Revoked), anywhere in the cluster.
func (s *SessionIDs) Terminated(id string) bool {
	s.mu.RLock()
	cluster := s.cluster
	ok := false
	if len(s.terminated) > 0 {
		_, ok = s.terminated[s.hashOf(id)]
	}
	s.mu.RUnlock()
	return ok || (cluster != nil && cluster.Revoked(id))
}

// SetMaxAge bounds how long an id stays valid after it was minted (0: no
// bound). The cluster forgets a connection's records and revocations after
// the same age, so no id can outlive what is known about it.
func (s *SessionIDs) SetMaxAge(d time.Duration) {
	s.mu.Lock()
	s.maxAge = d
	s.mu.Unlock()
}

// Terminate ends id on this node (a DELETE); the cluster's revocation
// carries it to the others.
func (s *SessionIDs) Terminate(id string) {
	d := s.hashOf(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.terminated[d]; ok {
		return
	}
	limit := maxTerminated
	if s.cluster != nil {
		limit = maxTerminatedClustered
	}
	if len(s.order) >= limit {
		delete(s.terminated, s.order[0])
		s.order = s.order[1:]
	}
	s.terminated[d] = struct{}{}
	s.order = append(s.order, d)
}

// labelledAEAD derives an AES-256-GCM cipher dedicated to one purpose from
// key (HMAC-SHA256 of the label), so one session key serves several seals
// without sharing key material between them.
func labelledAEAD(key []byte, label string) (cipher.AEAD, error) {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(label))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("creating cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("creating aead: %w", err)
	}
	return aead, nil
}

// Revocations is what an id's validity rests on beyond its seal: which ids
// a DELETE ended anywhere in the cluster, the floor below which every id
// counts as revoked, and whether serial ids may be minted.
type Revocations interface {
	// Revoked reports whether a DELETE on any node ended connection id.
	Revoked(connID string) bool
	// RevokedBefore bounds how many revocations the cluster keeps: every
	// id issued at or before it counts as revoked (the zero time: none).
	RevokedBefore() time.Time
	// MintSerial reports whether an id minted now may be a serial one
	// (readable by every live node).
	MintSerial() bool
}
