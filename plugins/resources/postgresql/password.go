package main

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/fedhost/fedhost/sdk"
)

// passwordKey is the entry of Result.Secrets (and Request.Secrets) holding the role's
// password, and the name the result's password reference gives.
const passwordKey = "password"

// passwordOf returns the password the host gave back, or a new one: 32 random bytes,
// base64url.
func passwordOf(secrets map[string][]byte) (string, error) {
	given, ok := secrets[passwordKey]
	if !ok || len(given) == 0 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("generating a password: %w", err)
		}
		return base64.RawURLEncoding.EncodeToString(b), nil
	}
	for _, c := range given {
		// Printable ASCII is what SASLprep leaves unchanged, so the verifier below matches
		// what a client sends.
		if c < 0x20 || c > 0x7e {
			return "", sdk.Invalid("secrets/"+passwordKey, "the given password is not printable ASCII: drop it to have a new one generated")
		}
	}
	return string(given), nil
}

// scramVerifier computes the SCRAM-SHA-256 verifier PostgreSQL stores for password, so
// that ALTER ROLE ... PASSWORD sends the verifier and never the password itself: nothing
// a server's statement log keeps can log in.
func scramVerifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("generating a salt: %w", err)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("deriving the password verifier: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	server := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(server)), nil
}
