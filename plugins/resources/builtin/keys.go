package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// signingKey is one of a deployment's RSA keys. Retired is zero while it signs; a retired
// key stays published until every ID token it signed has expired.
type signingKey struct {
	ID      string    `json:"kid"`
	PKCS8   []byte    `json:"pkcs8"`
	Created time.Time `json:"created"`
	Retired time.Time `json:"retired,omitzero"`

	private *rsa.PrivateKey
}

// keyRetention is how long a retired key stays in the JWKS: the ID token lifetime and a
// margin for clocks.
const keyRetention = idTokenLifetime + 5*time.Minute

// maxKeys bounds a key set handed back by the host.
const maxKeys = 20

func newSigningKey(now time.Time) (signingKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return signingKey{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return signingKey{}, err
	}
	return signingKey{ID: rand.Text()[:16], PKCS8: der, Created: now.UTC(), private: priv}, nil
}

// load parses the key's private half.
func (k *signingKey) load() error {
	if k.private != nil {
		return nil
	}
	parsed, err := x509.ParsePKCS8PrivateKey(k.PKCS8)
	if err != nil {
		return err
	}
	priv, ok := parsed.(*rsa.PrivateKey)
	if !ok || priv.N.BitLen() < 2048 {
		return fmt.Errorf("not an RSA key of at least 2048 bits")
	}
	k.private = priv
	return nil
}

// keySet is the JSON the host keeps in the secret resource.
type keySet struct {
	Keys []signingKey `json:"keys"`
}

func decodeKeySet(b []byte) ([]signingKey, error) {
	var s keySet
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("not a key set")
	}
	if len(s.Keys) > maxKeys {
		return nil, fmt.Errorf("%d keys: at most %d", len(s.Keys), maxKeys)
	}
	for i := range s.Keys {
		if len(s.Keys[i].ID) == 0 || len(s.Keys[i].ID) > 64 {
			return nil, fmt.Errorf("key %d has no key id of 1 to 64 characters", i)
		}
		if err := s.Keys[i].load(); err != nil {
			return nil, fmt.Errorf("key %d: %v", i, err)
		}
	}
	return s.Keys, nil
}

func encodeKeySet(keys []signingKey) ([]byte, error) {
	return json.Marshal(keySet{Keys: keys})
}

// mergeKeys adds the keys of b that a lacks (by key id), keeping a's record of a key both
// hold unless only b has retired it.
func mergeKeys(a, b []signingKey) []signingKey {
	out := slices.Clone(a)
	for _, k := range b {
		i := slices.IndexFunc(out, func(x signingKey) bool { return x.ID == k.ID })
		switch {
		case i < 0:
			out = append(out, k)
		case out[i].Retired.IsZero() && !k.Retired.IsZero():
			out[i].Retired = k.Retired
		}
	}
	return out
}

// rotate makes the key set current at now: the newest unretired key signs, and others
// are retired; a new key is made when none signs or the signing one is older than
// rotation; retired keys past keyRetention go. It reports whether the set changed.
func rotate(keys []signingKey, now time.Time, rotation time.Duration) ([]signingKey, bool, error) {
	changed := false
	active := -1
	for i, k := range keys {
		if k.Retired.IsZero() && (active < 0 || k.Created.After(keys[active].Created)) {
			active = i
		}
	}
	for i := range keys {
		if i != active && keys[i].Retired.IsZero() {
			keys[i].Retired = now.UTC()
			changed = true
		}
	}
	if active < 0 || now.Sub(keys[active].Created) >= rotation {
		if active >= 0 {
			keys[active].Retired = now.UTC()
		}
		k, err := newSigningKey(now)
		if err != nil {
			return nil, false, err
		}
		keys = append(keys, k)
		changed = true
	}
	kept := keys[:0]
	for _, k := range keys {
		if k.Retired.IsZero() || now.Sub(k.Retired) < keyRetention {
			kept = append(kept, k)
		} else {
			changed = true
		}
	}
	return kept, changed, nil
}

// activeKey is the key that signs: the one unretired key after rotate.
func activeKey(keys []signingKey) *signingKey {
	for i := range keys {
		if keys[i].Retired.IsZero() {
			return &keys[i]
		}
	}
	return nil
}

// opKey adapts a signingKey to the op package's SigningKey and Key.
type opKey struct{ k *signingKey }

func (o opKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (o opKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (o opKey) ID() string                                  { return o.k.ID }
func (o opKey) Use() string                                 { return "sig" }

// Key is the private key when signing and the public key in the JWKS; op calls it as
// SigningKey.Key and as Key.Key, so publicKey wraps the second.
func (o opKey) Key() any { return o.k.private }

type publicKey struct{ opKey }

func (p publicKey) Key() any { return &p.k.private.PublicKey }
