package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
)

// The CA's files in its directory; `fedhost ca root` reads rootFileName (host/cli).
const (
	keyFileName  = "ca-key.pem"
	rootFileName = "ca.pem"
	rootLifetime = 10 * 365 * 24 * time.Hour
	// maxCommonName is the upper bound X.509 puts on a common name (RFC 5280).
	maxCommonName = 64
)

// authority is the host's CA: its key and self-signed root.
type authority struct {
	key     *ecdsa.PrivateKey
	root    *x509.Certificate
	rootPEM []byte
}

// loadOrCreateAuthority reads the CA of dir, making its key and root on first start. A
// key without a root gets a new root for that key; a root without its key is refused,
// since a new key would silently distrust every certificate issued before.
func loadOrCreateAuthority(dir string, now time.Time) (*authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the CA directory %s: %w", dir, err)
	}
	keyPath, rootPath := filepath.Join(dir, keyFileName), filepath.Join(dir, rootFileName)
	key, err := readKey(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(rootPath); serr == nil {
			return nil, fmt.Errorf("the CA key %s is missing but its root %s is there: restore the key from a backup, or remove the root to make a new CA (certificates it issued are then no longer trusted)", keyPath, rootPath)
		}
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, fmt.Errorf("generating the CA key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := atomicfile.Write(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	rootPEM, err := os.ReadFile(rootPath)
	if errors.Is(err, fs.ErrNotExist) {
		if rootPEM, err = selfSign(key, now); err != nil {
			return nil, err
		}
		if err := atomicfile.Write(rootPath, rootPEM, 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("reading the CA root: %w", err)
	}
	root, err := parseCertificate(rootPEM)
	if err != nil {
		return nil, fmt.Errorf("the CA root %s: %w", rootPath, err)
	}
	if !root.IsCA || !key.PublicKey.Equal(root.PublicKey) {
		return nil, fmt.Errorf("the CA root %s is not a CA certificate of the key %s: restore the pair from one backup", rootPath, keyPath)
	}
	return &authority{key: key, root: root, rootPEM: rootPEM}, nil
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the CA key %s has mode %04o: others may read it; make it readable by its owner only (chmod 600 %s) and check that it was not copied", path, perm, path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the CA key: %w", err)
	}
	key, err := parseKey(text)
	if err != nil {
		return nil, fmt.Errorf("the CA key %s: %w", path, err)
	}
	return key, nil
}

func selfSign(key *ecdsa.PrivateKey, now time.Time) ([]byte, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	name := "fedhost local CA " + host
	if len(name) > maxCommonName {
		name = name[:maxCommonName]
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"fedhost"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(rootLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making the CA root: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// newSerial is 128 random bits, positive, as RFC 5280 and the CA/B forum ask.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("making a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func parseCertificate(text []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(text)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(text []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(text)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PKCS#8 private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an ECDSA key")
	}
	return ec, nil
}
