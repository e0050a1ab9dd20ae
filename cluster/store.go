package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Storage keeps this node's own partitions and its epoch history across
// restarts. Other origins are never stored: they come from peers. Methods
// must be safe for concurrent use.
type Storage interface {
	// Epochs returns the epochs this node has drawn, oldest first.
	Epochs() ([]uint64, error)
	// AddEpoch records a newly drawn epoch.
	AddEpoch(epoch uint64) error
	// Load calls fn with every stored entry of registry, in key order.
	Load(registry string, fn func(key string, value []byte) error) error
	// Write stores value under key in registry, or deletes key when value is
	// nil, and runs apply inside the same transaction: when apply returns an
	// error nothing is written and Write returns that error.
	Write(registry, key string, value []byte, apply func() error) error
	// Close releases the store.
	Close() error
}

// maxEpochHistory bounds the epoch history kept in a store.
const maxEpochHistory = 32

// ErrStorageClosed is returned by Storage methods after Close.
var ErrStorageClosed = errors.New("cluster: storage closed")

// MemoryStorage is a Storage that keeps everything in memory: for nodes
// without a data dir and for tests.
type MemoryStorage struct {
	mu     sync.Mutex
	epochs []uint64
	regs   map[string]map[string][]byte
	closed bool
}

// NewMemoryStorage returns an empty MemoryStorage.
func NewMemoryStorage() *MemoryStorage {
	return &MemoryStorage{regs: map[string]map[string][]byte{}}
}

// Epochs implements Storage.
func (s *MemoryStorage) Epochs() ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrStorageClosed
	}
	return slices.Clone(s.epochs), nil
}

// AddEpoch implements Storage.
func (s *MemoryStorage) AddEpoch(epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStorageClosed
	}
	s.epochs = append(s.epochs, epoch)
	if len(s.epochs) > maxEpochHistory {
		s.epochs = slices.Clone(s.epochs[len(s.epochs)-maxEpochHistory:])
	}
	return nil
}

// Load implements Storage.
func (s *MemoryStorage) Load(registry string, fn func(string, []byte) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrStorageClosed
	}
	reg := s.regs[registry]
	keys := make([]string, 0, len(reg))
	for k := range reg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = slices.Clone(reg[k])
	}
	s.mu.Unlock()
	for i, k := range keys {
		if err := fn(k, vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// Write implements Storage.
func (s *MemoryStorage) Write(registry, key string, value []byte, apply func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStorageClosed
	}
	if err := apply(); err != nil {
		return err
	}
	reg := s.regs[registry]
	if reg == nil {
		reg = map[string][]byte{}
		s.regs[registry] = reg
	}
	if value == nil {
		delete(reg, key)
	} else {
		reg[key] = slices.Clone(value)
	}
	return nil
}

// Close implements Storage. The data stays readable by a new MemoryStorage
// only through Reopen.
func (s *MemoryStorage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Reopen makes a closed MemoryStorage usable again with its data, as a
// restarted process would find its bbolt file.
func (s *MemoryStorage) Reopen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = false
}

// BoltStorage is the Storage in a bbolt file. Each registry has its own
// bucket ("reg/<name>"); the epoch history lives in "epochs".
type BoltStorage struct {
	db *bolt.DB
}

var bucketEpochs = []byte("epochs")

// OpenBolt opens (or creates) dir/node.db. noSync skips fsync (tests).
func OpenBolt(dir string, noSync bool) (*BoltStorage, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "node.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketEpochs)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initializing %s: %w", path, err)
	}
	return &BoltStorage{db: db}, nil
}

func registryBucket(name string) []byte { return []byte("reg/" + name) }

// Epochs implements Storage.
func (s *BoltStorage) Epochs() ([]uint64, error) {
	var out []uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEpochs).ForEach(func(k, _ []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("epoch key of %d bytes", len(k))
			}
			out = append(out, binary.BigEndian.Uint64(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading epochs: %w", err)
	}
	return out, nil
}

// AddEpoch implements Storage. It keeps the newest maxEpochHistory epochs.
func (s *BoltStorage) AddEpoch(epoch uint64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEpochs)
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], epoch)
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(time.Now().UnixMilli()))
		if err := b.Put(k[:], v[:]); err != nil {
			return err
		}
		var keys [][]byte
		if err := b.ForEach(func(k, _ []byte) error {
			keys = append(keys, slices.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		for len(keys) > maxEpochHistory {
			if err := b.Delete(keys[0]); err != nil {
				return err
			}
			keys = keys[1:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording epoch %d: %w", epoch, err)
	}
	return nil
}

// Load implements Storage.
func (s *BoltStorage) Load(registry string, fn func(string, []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(registryBucket(registry))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			return fn(string(k), slices.Clone(v))
		})
	})
	if err != nil {
		return fmt.Errorf("loading registry %s: %w", registry, err)
	}
	return nil
}

// Write implements Storage.
func (s *BoltStorage) Write(registry, key string, value []byte, apply func() error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(registryBucket(registry))
		if err != nil {
			return fmt.Errorf("creating bucket for %s: %w", registry, err)
		}
		if value == nil {
			err = b.Delete([]byte(key))
		} else {
			err = b.Put([]byte(key), value)
		}
		if err != nil {
			return fmt.Errorf("writing %s/%s: %w", registry, key, err)
		}
		return apply()
	})
}

// Close implements Storage.
func (s *BoltStorage) Close() error {
	return s.db.Close()
}

// Volatile wraps s so that the named registries are never stored: a
// write to one only runs apply (the map changes and the delta is
// replicated as usual), and Load finds nothing in it. It is for registries
// whose owner rebuilds its own entries at every start from durable state
// of its own, so storing them would buy nothing but a transaction (and
// its fsync) per write. Other registries, the epochs and Close go to s.
func Volatile(s Storage, registries ...string) Storage {
	v := volatileStorage{Storage: s, names: make(map[string]bool, len(registries))}
	for _, name := range registries {
		v.names[name] = true
	}
	return v
}

type volatileStorage struct {
	Storage
	names map[string]bool
}

// Load implements Storage.
func (v volatileStorage) Load(registry string, fn func(string, []byte) error) error {
	if v.names[registry] {
		return nil
	}
	return v.Storage.Load(registry, fn)
}

// Write implements Storage.
func (v volatileStorage) Write(registry, key string, value []byte, apply func() error) error {
	if v.names[registry] {
		return apply()
	}
	return v.Storage.Write(registry, key, value, apply)
}

var (
	_ Storage = (*MemoryStorage)(nil)
	_ Storage = (*BoltStorage)(nil)
	_ Storage = volatileStorage{}
)
