package authz

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.yaml.in/yaml/v3"
)

// JWT verification settings and bounds.
const (
	// DefaultJWTLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultJWTLeeway = 30 * time.Second
	// MaxJWTLeeway bounds the leeway a policy may set.
	MaxJWTLeeway = 5 * time.Minute
	// MinHS256SecretBytes is the shortest HS256 secret accepted.
	MinHS256SecretBytes = 32
	// MinRSABits is the smallest RSA modulus accepted.
	MinRSABits = 2048
	// maxKeyFileBytes bounds a key or JWKS file.
	maxKeyFileBytes = 1 << 20
)

// jwtVerifier checks JWTs against a fixed key set.
type jwtVerifier struct {
	issuer    string
	audiences []string
	leeway    time.Duration
	keys      []verifyKey
	methods   []string // the algorithms of keys, the only ones accepted
}

// verifyKey is one verification key and the one algorithm it verifies.
type verifyKey struct {
	kid string
	alg string
	key any
}

// tokenClaims are the claims mcpswarm reads from a JWT.
type tokenClaims struct {
	jwt.RegisteredClaims
	Roles []string `json:"roles,omitempty"`
}

// verify checks raw and returns its principal and expiry. now is the clock
// (nil: the system clock).
func (v *jwtVerifier) verify(raw string, now func() time.Time) (Principal, time.Time, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithIssuer(v.issuer),
		jwt.WithAudience(v.audiences...),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.leeway),
		jwt.WithStrictDecoding(),
	}
	if now != nil {
		opts = append(opts, jwt.WithTimeFunc(now))
	}
	var claims tokenClaims
	if _, err := jwt.NewParser(opts...).ParseWithClaims(raw, &claims, v.keyFor); err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("verifying jwt: %w", err)
	}
	if err := validSubject(claims.Subject); err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("verifying jwt: %w", err)
	}
	for _, role := range claims.Roles {
		if !roleRE.MatchString(role) {
			return Principal{}, time.Time{}, fmt.Errorf("verifying jwt: bad role %q in the roles claim", truncate(role, 64))
		}
	}
	// WithExpirationRequired guarantees ExpiresAt is set.
	return Principal{Subject: claims.Subject, Roles: slices.Compact(claims.Roles), Authenticated: true}, claims.ExpiresAt.Time, nil
}

// keyFor picks the keys that may have signed t: same algorithm and, when both
// name one, the same key id.
func (v *jwtVerifier) keyFor(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range v.keys {
		if k.alg == alg && (kid == "" || k.kid == "" || k.kid == kid) {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("no %s key with id %q", alg, kid)
	}
	return set, nil
}

// jwt parses the policy's jwt section and loads its key material.
func (r *nodeReader) jwt(key, n *yaml.Node, dir string, readFile readFileFunc) (*jwtVerifier, error) {
	fields, err := r.mapping(n, "jwt", "issuer", "audience", "leeway", "hs256_secret_file", "public_keys", "jwks_file")
	if err != nil {
		return nil, err
	}
	v := &jwtVerifier{leeway: DefaultJWTLeeway}
	var source *field
	for i, f := range fields {
		switch f.key {
		case "issuer":
			v.issuer, err = r.nonEmptyStr(f.value, "jwt.issuer")
		case "audience":
			if f.value.Kind == yaml.SequenceNode {
				v.audiences, err = r.strList(f.value, "jwt.audience")
				if err == nil && len(v.audiences) == 0 {
					err = r.errf(f.value, "jwt.audience is an empty list; name at least one audience")
				}
			} else {
				var a string
				a, err = r.nonEmptyStr(f.value, "jwt.audience")
				v.audiences = []string{a}
			}
		case "leeway":
			var s string
			if s, err = r.str(f.value, "jwt.leeway"); err == nil {
				d, perr := time.ParseDuration(s)
				if perr != nil || d < 0 || d > MaxJWTLeeway {
					err = r.errf(f.value, "jwt.leeway must be a duration from 0s to %s, not %q", MaxJWTLeeway, s)
				}
				v.leeway = d
			}
		case "hs256_secret_file", "public_keys", "jwks_file":
			if source != nil {
				return nil, r.errf(f.keyN, "jwt has both %s and %s; give exactly one key source", source.key, f.key)
			}
			source = &fields[i]
		}
		if err != nil {
			return nil, err
		}
	}
	if v.issuer == "" {
		return nil, r.errf(key, "jwt needs issuer")
	}
	if len(v.audiences) == 0 {
		return nil, r.errf(key, "jwt needs audience")
	}
	if source == nil {
		return nil, r.errf(key, "jwt needs one key source: hs256_secret_file, public_keys or jwks_file")
	}
	if v.keys, err = r.jwtKeys(source, dir, readFile); err != nil {
		return nil, err
	}
	for _, k := range v.keys {
		if !slices.Contains(v.methods, k.alg) {
			v.methods = append(v.methods, k.alg)
		}
	}
	return v, nil
}

func (r *nodeReader) jwtKeys(f *field, dir string, readFile readFileFunc) ([]verifyKey, error) {
	read := func(n *yaml.Node) (string, []byte, error) {
		name, err := r.nonEmptyStr(n, "jwt."+f.key)
		if err != nil {
			return "", nil, err
		}
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		data, err := readFile(path)
		if err != nil {
			return "", nil, r.errf(n, "jwt.%s: reading key file: %v", f.key, err)
		}
		if len(data) > maxKeyFileBytes {
			return "", nil, r.errf(n, "jwt.%s: %s is larger than %d bytes", f.key, path, maxKeyFileBytes)
		}
		return path, data, nil
	}
	switch f.key {
	case "hs256_secret_file":
		path, data, err := read(f.value)
		if err != nil {
			return nil, err
		}
		secret := bytes.TrimSpace(data)
		if len(secret) < MinHS256SecretBytes {
			return nil, r.errf(f.value, "jwt.hs256_secret_file: the secret in %s is %d bytes; at least %d are needed", path, len(secret), MinHS256SecretBytes)
		}
		return []verifyKey{{alg: "HS256", key: secret}}, nil
	case "public_keys":
		files, err := r.strList(f.value, "jwt.public_keys")
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, r.errf(f.value, "jwt.public_keys is an empty list; name at least one PEM file")
		}
		var keys []verifyKey
		for _, item := range f.value.Content {
			path, data, err := read(item)
			if err != nil {
				return nil, err
			}
			ks, err := parsePEMKeys(data)
			if err != nil {
				return nil, r.errf(item, "jwt.public_keys: %s: %v", path, err)
			}
			keys = append(keys, ks...)
		}
		return keys, nil
	default: // jwks_file
		path, data, err := read(f.value)
		if err != nil {
			return nil, err
		}
		keys, err := parseJWKS(data)
		if err != nil {
			return nil, r.errf(f.value, "jwt.jwks_file: %s: %v", path, err)
		}
		return keys, nil
	}
}

// parsePEMKeys reads every public key (PUBLIC KEY, RSA PUBLIC KEY or
// CERTIFICATE block) in a PEM file. A private key is refused: the node only
// verifies.
func parsePEMKeys(data []byte) ([]verifyKey, error) {
	var keys []verifyKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var pub any
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = cert.PublicKey
			}
		default:
			if strings.Contains(block.Type, "PRIVATE") {
				return nil, fmt.Errorf("holds a %s; give the public key only", block.Type)
			}
			return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", block.Type, err)
		}
		alg, err := algFor(pub, "")
		if err != nil {
			return nil, err
		}
		keys = append(keys, verifyKey{alg: alg, key: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key found")
	}
	return keys, nil
}

// algFor is the JWS algorithm a public key verifies. want, when set (a JWK's
// alg), must agree with the key.
func algFor(pub any, want string) (string, error) {
	var alg string
	var ok []string
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return "", fmt.Errorf("RSA key of %d bits; at least %d are needed", k.N.BitLen(), MinRSABits)
		}
		alg, ok = "RS256", []string{"RS256", "RS384", "RS512"}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			alg = "ES256"
		case elliptic.P384():
			alg = "ES384"
		case elliptic.P521():
			alg = "ES512"
		default:
			return "", errors.New("unsupported elliptic curve")
		}
		ok = []string{alg}
	default:
		return "", fmt.Errorf("unsupported key type %T (want RSA or ECDSA)", pub)
	}
	if want != "" {
		if !slices.Contains(ok, want) {
			return "", fmt.Errorf("alg %q does not fit a %s key", want, alg[:2])
		}
		alg = want
	}
	return alg, nil
}

// jwk is the subset of RFC 7517 fields mcpswarm reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// parseJWKS reads the signature keys of a JWK set. Keys with use "enc" are
// skipped; private key material and unsupported key types are errors.
func parseJWKS(data []byte) ([]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parsing JWKS: %w", err)
	}
	var keys []verifyKey
	for i, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		if k.D != "" {
			return nil, fmt.Errorf("key %d (%q) holds private key material; publish the public key only", i, k.Kid)
		}
		pub, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("key %d (%q): %w", i, k.Kid, err)
		}
		alg, err := algFor(pub, k.Alg)
		if err != nil {
			return nil, fmt.Errorf("key %d (%q): %w", i, k.Kid, err)
		}
		keys = append(keys, verifyKey{kid: k.Kid, alg: alg, key: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("no signature key in the JWKS")
	}
	return keys, nil
}

func (k jwk) publicKey() (any, error) {
	b64 := func(name, s string) ([]byte, error) {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("bad base64url in %s", name)
		}
		return b, nil
	}
	switch k.Kty {
	case "RSA":
		n, err := b64("n", k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64("e", k.E)
		if err != nil {
			return nil, err
		}
		if len(e) > 4 {
			return nil, errors.New("RSA exponent too large")
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		if exp < 3 || exp%2 == 0 {
			return nil, fmt.Errorf("bad RSA exponent %d", exp)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err := b64("x", k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64("y", k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, fmt.Errorf("%s coordinates must be %d bytes", k.Crv, size)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, fmt.Errorf("bad %s point: %w", k.Crv, err)
		}
		return pub, nil
	case "":
		return nil, errors.New("missing kty")
	default:
		return nil, fmt.Errorf("unsupported kty %q (want RSA or EC)", k.Kty)
	}
}
