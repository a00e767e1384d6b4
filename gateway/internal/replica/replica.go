// Package replica is who this toolgate is among the replicas of a
// cluster: its ID, which every key naming state it owns carries (session
// IDs, thread handles, requestStates), and the keys those are sealed
// with. A lone toolgate (no cluster section) has no ID and keys of its
// own, drawn at start; replicas derive theirs from the cluster's shared
// secret, so that any replica can open what another sealed and tell which
// replica owns it.
package replica

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
)

// KeyLen is the length of every key.
const KeyLen = 32

// Self is this replica. The zero value is not usable: build it with
// [Alone] or [Member].
type Self struct {
	// ID names this replica; "" when it is alone.
	ID string
	// secrets are the cluster secret and the previous one while rotating
	// (nil when alone); alone is the random root drawn at start.
	secrets [][]byte
	alone   []byte
}

// Alone is a toolgate with no cluster: its keys are drawn at start, and
// nothing it sealed opens after a restart.
func Alone() *Self {
	root := make([]byte, KeyLen)
	_, _ = rand.Read(root) // crypto/rand.Read never fails (Go 1.24+)
	return &Self{alone: root}
}

// Member is replica id of a cluster whose secret is secret (and previous,
// while rotating; "" for none).
func Member(id, secret, previous string) *Self {
	s := &Self{ID: id, secrets: [][]byte{[]byte(secret)}}
	if previous != "" {
		s.secrets = append(s.secrets, []byte(previous))
	}
	return s
}

// Keys returns the keys for purpose (a label naming what they seal, like
// "requestState"): the one to seal with first, then those that still
// open (the previous secret's, while rotating). Distinct purposes get
// unrelated keys.
func (s *Self) Keys(purpose string) [][KeyLen]byte {
	roots := s.secrets
	if roots == nil {
		roots = [][]byte{s.alone}
	}
	keys := make([][KeyLen]byte, len(roots))
	for i, root := range roots {
		k, err := hkdf.Key(sha256.New, root, nil, "toolgate/"+purpose, KeyLen)
		if err != nil {
			panic("replica: HKDF-SHA256 refused a 32-byte key: " + err.Error()) // cannot happen: the length is far below its limit
		}
		copy(keys[i][:], k)
	}
	return keys
}

// Owns reports whether a key naming replica id names state of this
// replica: the same ID (a lone toolgate's keys name none).
func (s *Self) Owns(id string) bool { return id == s.ID }
