package migration

import (
	"fmt"
	"path/filepath"
	"time"

	"filippo.io/age"

	"github.com/fedhost/fedhost/host/agekey"
)

// KeyFileName is the target's identity file in the host's data directory. Every host of
// a cluster needs the same file, so that any of them opens the strings sent to the
// cluster's recipient.
const KeyFileName = "migration-identity.txt"

// Keys is a fedhost's migration identity: strings made for it open with it.
type Keys struct {
	id *age.HybridIdentity
}

// LoadKeys reads the identity in dataDir, making it on first start.
func LoadKeys(dataDir string) (*Keys, error) {
	f := agekey.File{Name: KeyFileName, What: "the migration key",
		Header: "fedhost: the key that opens migration strings made for this fedhost. Losing it only means exporting again.",
		Generate: func() (string, error) {
			id, err := age.GenerateHybridIdentity()
			if err != nil {
				return "", err
			}
			return id.String(), nil
		}}
	got, err := f.LoadOrCreate(dataDir)
	if err != nil {
		return nil, err
	}
	id, ok := got.(*age.HybridIdentity)
	if !ok {
		return nil, fmt.Errorf("the migration key file %s must hold a post-quantum hybrid age identity (AGE-SECRET-KEY-PQ-1...)", filepath.Join(dataDir, KeyFileName))
	}
	return &Keys{id: id}, nil
}

// Recipient is what the target publishes: sources encrypt to it.
func (k *Keys) Recipient() string { return k.id.Recipient().String() }

// Open opens a string made for this fedhost.
func (k *Keys) Open(s string, now time.Time) (Payload, error) { return Open(s, k.id, now) }
