// Package tfstate holds the host's key for the Terraform states it keeps for the
// terraform provider: the age identity that seals each state at rest, and the key of the
// tokens that open one workspace each.
//
// The identity is the file terraform-state-identity.txt in the host's data directory,
// made (mode 0600) on first start. Every host of a cluster needs the same file; losing it
// loses every state (the resources Terraform made stay, unmanaged).
package tfstate

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"filippo.io/age"

	"github.com/fedhost/fedhost/host/agekey"
)

// KeyFileName is the identity's file in the host's data directory.
const KeyFileName = "terraform-state-identity.txt"

// Keys seal states and check workspace tokens.
type Keys struct {
	id       *age.X25519Identity
	stateKey string
}

// LoadOrCreate reads the identity in dataDir, making it on first start. A key file that
// others may read is refused.
func LoadOrCreate(dataDir string) (*Keys, error) {
	f := agekey.File{Name: KeyFileName, What: "the terraform state key",
		Header: "fedhost: the key of the Terraform states the host keeps. Losing it loses every state.",
		Generate: func() (string, error) {
			id, err := age.GenerateX25519Identity()
			if err != nil {
				return "", err
			}
			return id.String(), nil
		}}
	got, err := f.LoadOrCreate(dataDir)
	if err != nil {
		return nil, err
	}
	id, ok := got.(*age.X25519Identity)
	if !ok {
		return nil, fmt.Errorf("the terraform state key file %s must hold an X25519 identity", filepath.Join(dataDir, KeyFileName))
	}
	mac := hmac.New(sha256.New, []byte(id.String()))
	mac.Write([]byte("fedhost terraform state tokens"))
	return &Keys{id: id, stateKey: hex.EncodeToString(mac.Sum(nil))}, nil
}

// StateKey is the key the terraform provider mints workspace tokens with (its state_key
// setting, filled in by the host).
func (k *Keys) StateKey() string { return k.stateKey }

// Token is the token of one workspace: hex HMAC-SHA256 of "tenant/instance" under the
// state key. The terraform provider computes the same.
func Token(stateKey, tenant, instance string) string {
	mac := hmac.New(sha256.New, []byte(stateKey))
	mac.Write([]byte(tenant + "/" + instance))
	return hex.EncodeToString(mac.Sum(nil))
}

// Opens reports, in constant time, whether token is the token of tenant/instance.
func (k *Keys) Opens(token, tenant, instance string) bool {
	return hmac.Equal([]byte(token), []byte(Token(k.stateKey, tenant, instance)))
}

// Seal encrypts a state to the identity, as base64 for a text column.
func (k *Keys) Seal(state []byte) (string, error) {
	var ct bytes.Buffer
	w, err := age.Encrypt(&ct, k.id.Recipient())
	if err != nil {
		return "", fmt.Errorf("sealing the terraform state: %w", err)
	}
	if _, err := w.Write(state); err != nil {
		return "", fmt.Errorf("sealing the terraform state: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("sealing the terraform state: %w", err)
	}
	return base64.StdEncoding.EncodeToString(ct.Bytes()), nil
}

// Open decrypts what Seal made.
func (k *Keys) Open(sealed string) ([]byte, error) {
	ct, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return nil, errors.New("the stored terraform state is damaged (not base64): restore the database from a backup")
	}
	r, err := age.Decrypt(bytes.NewReader(ct), k.id)
	if err != nil {
		return nil, fmt.Errorf("the stored terraform state cannot be decrypted: it was sealed with another %s than this host's, or is damaged", KeyFileName)
	}
	state, err := io.ReadAll(r)
	if err != nil {
		return nil, errors.New("the stored terraform state is damaged (its authentication failed): restore the database from a backup")
	}
	return state, nil
}
