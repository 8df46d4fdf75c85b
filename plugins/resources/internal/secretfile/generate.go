package secretfile

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"

	"github.com/fedhost/fedhost/sdk/contract"
)

const alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// encodingOf gives g's encoding, alphanumeric when the request names none.
func encodingOf(g *contract.Generate) string {
	if g.Encoding == "" {
		return "alphanumeric"
	}
	return g.Encoding
}

// Generate makes a new value with crypto/rand: Length random bytes in Encoding (for
// alphanumeric, Length characters), or a key pair as a PKCS#8 PEM private key.
func Generate(g contract.Generate) ([]byte, error) {
	switch g.KeyPair {
	case "ed25519":
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating an ed25519 key: %w", err)
		}
		return privatePEM(key)
	case "ecdsa-p256":
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating an ecdsa-p256 key: %w", err)
		}
		return privatePEM(key)
	case "":
	default:
		return nil, fmt.Errorf("unknown key pair %q: want ed25519 or ecdsa-p256", g.KeyPair)
	}
	if g.Length < 1 {
		return nil, fmt.Errorf("a generated value needs a length")
	}
	enc := encodingOf(&g)
	if enc == "alphanumeric" {
		return Alphanumeric(rand.Reader, g.Length)
	}
	raw := make([]byte, g.Length)
	if _, err := io.ReadFull(rand.Reader, raw); err != nil {
		return nil, fmt.Errorf("reading random bytes: %w", err)
	}
	switch enc {
	case "hex":
		return []byte(hex.EncodeToString(raw)), nil
	case "base64":
		return []byte(base64.StdEncoding.EncodeToString(raw)), nil
	case "base64url":
		return []byte(base64.RawURLEncoding.EncodeToString(raw)), nil
	}
	return nil, fmt.Errorf("unknown encoding %q: want hex, base64, base64url or alphanumeric", enc)
}

// Alphanumeric draws n characters of [A-Za-z0-9] from random, by rejection sampling so
// that every character is equally likely.
func Alphanumeric(random io.Reader, n int) ([]byte, error) {
	// 248 is the largest multiple of 62 that fits a byte; bytes above it are rejected.
	const limit = 256 - 256%len(alphanumeric)
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := io.ReadFull(random, buf); err != nil {
			return nil, fmt.Errorf("reading random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, alphanumeric[int(b)%len(alphanumeric)])
			if len(out) == n {
				break
			}
		}
	}
	return out, nil
}

func privatePEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// PublicPEM gives the public half (PKIX PEM) of a PKCS#8 PEM private key.
func PublicPEM(private []byte) (string, error) {
	block, _ := pem.Decode(private)
	if block == nil || block.Type != "PRIVATE KEY" {
		return "", errors.New("the stored key pair is not a PEM private key")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return "", errors.New("the stored key pair is not a PKCS#8 private key")
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return "", errors.New("the stored key pair has no public half")
	}
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return "", fmt.Errorf("encoding the public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}
