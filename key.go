package mcpswarm

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// ClusterKeySize is the length in bytes of the cluster's shared secret.
const ClusterKeySize = 32

// devKeyText is the publicly known development key. It exists so several
// `--dev` nodes on one machine form a cluster with nothing to set up; it is
// only ever used on loopback and its use is logged loudly.
const devKeyText = "mcpswarm-development-key-not-secret!!"

// DevClusterKey returns the fixed, publicly known development cluster key.
func DevClusterKey() []byte {
	sum := sha256.Sum256([]byte(devKeyText))
	return sum[:]
}

// GenerateClusterKey draws a new random cluster key and returns it encoded
// as the key file expects (base64 of 32 bytes, with a trailing newline).
func GenerateClusterKey() (string, error) {
	key := make([]byte, ClusterKeySize)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("drawing random key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(key) + "\n", nil
}

// LoadClusterKey reads a cluster key file: base64 of exactly 32 bytes.
func LoadClusterKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading cluster key: %w", err)
	}
	return ParseClusterKey(string(data))
}

// ParseClusterKey decodes the text of a cluster key file.
func ParseClusterKey(text string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return nil, fmt.Errorf("cluster key is not base64: %w", err)
	}
	if len(key) != ClusterKeySize {
		return nil, fmt.Errorf("cluster key must be %d bytes, got %d (write one with `mcpswarm keygen`)", ClusterKeySize, len(key))
	}
	return key, nil
}

// DeriveKey derives a purpose-bound subkey from the cluster key, so that
// gossip encryption, peer authentication and session-id sealing never share
// key material.
func DeriveKey(clusterKey []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, clusterKey, []byte("mcpswarm/v1"), purpose, 32)
	if err != nil {
		// hkdf.Key fails only for lengths beyond 255*32 bytes.
		panic(fmt.Sprintf("deriving %s key: %v", purpose, err))
	}
	return k
}
