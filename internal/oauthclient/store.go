package oauthclient

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// KeyEnv names the environment variable holding the token store's key:
// 32 bytes, base64-encoded (`openssl rand -base64 32`). PreviousKeyEnv
// holds the key it replaces during a rotation: the store is read with
// either and written with KeyEnv's.
const (
	KeyEnv         = "TOOLGATE_TOKEN_KEY"
	PreviousKeyEnv = "TOOLGATE_TOKEN_KEY_PREVIOUS"
)

// storeVersion marks the file format; a file of another version is
// refused rather than misread.
const storeVersion = 1

// Record is what the store keeps of one upstream (for one principal, with
// per-principal authorization): where its authorization server is, the
// client's registration there, and the current token.
type Record struct {
	Upstream  string `json:"upstream"`
	Principal string `json:"principal,omitempty"`
	// Server is the upstream's URL the record was made for: a record for
	// another URL is not used.
	Server             string        `json:"server"`
	Resource           string        `json:"resource"`
	Issuer             string        `json:"issuer"`
	TokenEndpoint      string        `json:"token_endpoint"`
	RevocationEndpoint string        `json:"revocation_endpoint,omitempty"`
	ClientID           string        `json:"client_id"`
	ClientSecret       string        `json:"client_secret,omitempty"`
	AuthMethod         string        `json:"auth_method"`
	Scopes             []string      `json:"scopes,omitempty"`
	Token              *oauth2.Token `json:"token,omitempty"`
	Updated            time.Time     `json:"updated"`
}

// key is the record's key in the store.
func (r *Record) key() string { return recordKey(r.Upstream, r.Principal) }

func recordKey(upstream, principal string) string { return upstream + "\x00" + principal }

// Store keeps Records in one file, encrypted with AES-256-GCM under a key
// the operator supplies, written with mode 0600 through a temporary file
// and a rename, so that a reader never sees half a file. Every write
// re-reads the file first, so that `toolgate auth login` and a running
// `toolgate serve` do not undo each other's records. Safe for concurrent
// use within a process.
type Store struct {
	path string
	aead cipher.AEAD
	prev cipher.AEAD // nil unless a rotation is under way
	mu   sync.Mutex
}

// OpenStore returns the store at path, keyed with key and, during a
// rotation, also readable with prev (nil otherwise). Each is 32 bytes.
func OpenStore(path string, key, prev []byte) (*Store, error) {
	s := &Store{path: path}
	var err error
	if s.aead, err = newAEAD(key); err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	if prev != nil {
		if s.prev, err = newAEAD(prev); err != nil {
			return nil, fmt.Errorf("previous token store key (%s): %w", PreviousKeyEnv, err)
		}
	}
	return s, nil
}

// LoadKey returns the store key from the environment variable KeyEnv, or
// else from keyFile, and the previous key from PreviousKeyEnv (nil when
// it is not set). Each is 32 bytes, base64-encoded.
func LoadKey(getenv func(string) string, keyFile string) (key, prev []byte, err error) {
	text := getenv(KeyEnv)
	from := "$" + KeyEnv
	if text == "" && keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the token store key file: %w", err)
		}
		text, from = string(b), keyFile
	}
	if text == "" {
		return nil, nil, fmt.Errorf("no token store key: set %s to 32 random bytes in base64 (openssl rand -base64 32), or name a file holding one in token_store.key_file", KeyEnv)
	}
	if key, err = decodeKey(text); err != nil {
		return nil, nil, fmt.Errorf("the token store key in %s: %w", from, err)
	}
	if p := getenv(PreviousKeyEnv); p != "" {
		if prev, err = decodeKey(p); err != nil {
			return nil, nil, fmt.Errorf("the token store key in $%s: %w", PreviousKeyEnv, err)
		}
	}
	return key, prev, nil
}

func decodeKey(text string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != 32 {
		return nil, errors.New("must be 32 bytes in base64 (openssl rand -base64 32)")
	}
	return b, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, errors.New("must be 32 bytes")
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Get returns the record of upstream for principal, or nil.
func (s *Store) Get(upstream, principal string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.read()
	if err != nil {
		return nil, err
	}
	return all[recordKey(upstream, principal)], nil
}

// List returns every record.
func (s *Store) List() ([]*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.read()
	if err != nil {
		return nil, err
	}
	out := make([]*Record, 0, len(all))
	for _, r := range all {
		out = append(out, r)
	}
	return out, nil
}

// Put stores r, replacing the record of its upstream and principal.
func (s *Store) Put(r *Record) error {
	return s.update(func(all map[string]*Record) { r.Updated = time.Now().UTC(); all[r.key()] = r })
}

// Delete forgets the record of upstream for principal.
func (s *Store) Delete(upstream, principal string) error {
	return s.update(func(all map[string]*Record) { delete(all, recordKey(upstream, principal)) })
}

func (s *Store) update(f func(map[string]*Record)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.read()
	if err != nil {
		return err
	}
	f(all)
	return s.write(all)
}

// sealed is the file's JSON: the version and the encrypted records.
type sealed struct {
	Version int    `json:"version"`
	Nonce   []byte `json:"nonce"`
	Data    []byte `json:"data"`
}

// read decrypts the file; a missing file is an empty store.
func (s *Store) read() (map[string]*Record, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]*Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the token store: %w", err)
	}
	var f sealed
	if err := json.Unmarshal(b, &f); err != nil || f.Version != storeVersion {
		return nil, fmt.Errorf("the token store %s is not a toolgate token store (version %d); move it away", s.path, storeVersion)
	}
	plain, err := s.aead.Open(nil, f.Nonce, f.Data, []byte(s.path))
	if err != nil && s.prev != nil {
		plain, err = s.prev.Open(nil, f.Nonce, f.Data, []byte(s.path))
	}
	if err != nil {
		return nil, fmt.Errorf("the token store %s does not decrypt with the key given (%s or token_store.key_file); during a key rotation, set the old key in %s", s.path, KeyEnv, PreviousKeyEnv)
	}
	all := map[string]*Record{}
	if err := json.Unmarshal(plain, &all); err != nil {
		return nil, fmt.Errorf("the token store %s holds malformed records: %w", s.path, err)
	}
	return all, nil
}

// write encrypts all into a temporary file of mode 0600 beside the store
// and renames it over the store.
func (s *Store) write(all map[string]*Record) error {
	plain, err := json.Marshal(all)
	if err != nil {
		return err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	b, err := json.Marshal(sealed{Version: storeVersion, Nonce: nonce, Data: s.aead.Seal(nil, nonce, plain, []byte(s.path))})
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the token store's directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tokens-*")
	if err != nil {
		return fmt.Errorf("writing the token store: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, it is gone already
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the token store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the token store: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("writing the token store: %w", err)
	}
	return nil
}
