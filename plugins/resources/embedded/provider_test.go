package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/plugins/resources/internal/secretfile/secrettest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// setup returns a provider configured on a fresh directory.
func setup(t *testing.T) (*provider, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secrets")
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), json.RawMessage(`{"dir":"`+dir+`"}`)))
	return p, dir
}

func provision(t *testing.T, p *provider, tenant, instance, spec string, secrets map[string][]byte) contract.SecretResult {
	t.Helper()
	res, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: instance, Type: contract.Secret, Spec: json.RawMessage(spec), Secrets: secrets})
	require.NoError(t, err)
	require.NoError(t, contract.ValidateResult(contract.Secret, res.Data))
	require.Empty(t, res.Secrets, "the values stay in the provider")
	var out contract.SecretResult
	require.NoError(t, json.Unmarshal(res.Data, &out))
	return out
}

func TestKeyFileIsPrivateAndReused(t *testing.T) {
	t.Parallel()
	p, dir := setup(t)
	key := filepath.Join(dir, keyFileName)
	info, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())
	info, err = os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), info.Mode().Perm())

	res := provision(t, p, "acme", "web", `{"files":{"pw":{"generate":{"length":16}}}}`, nil)
	before, err := os.ReadFile(key)
	require.NoError(t, err)

	again := &provider{}
	require.NoError(t, again.Configure(context.Background(), json.RawMessage(`{"dir":"`+dir+`"}`)))
	after, err := os.ReadFile(key)
	require.NoError(t, err)
	require.Equal(t, before, after, "a second start must reuse the key file")
	_, err = again.Reveal(context.Background(), "acme", "web", res.Files["pw"].Ref)
	require.NoError(t, err, "a second start must decrypt what the first wrote")
}

func TestKeyFileWithWiderModeIsRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o644, 0o660} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			_, dir := setup(t)
			key := filepath.Join(dir, keyFileName)
			require.NoError(t, os.Chmod(key, mode))
			err := (&provider{}).Configure(context.Background(), json.RawMessage(`{"dir":"`+dir+`"}`))
			require.Error(t, err)
			require.Contains(t, err.Error(), key)
			require.Contains(t, err.Error(), "chmod 600")
		})
	}
}

func TestTamperedCiphertextFailsToDecrypt(t *testing.T) {
	t.Parallel()
	p, dir := setup(t)
	res := provision(t, p, "acme", "web", `{"files":{"pw":{"generate":{"length":16}}}}`, nil)
	path := filepath.Join(dir, "acme", "web", "pw", "v1.age")
	ct, err := os.ReadFile(path)
	require.NoError(t, err)
	ct[len(ct)-5] ^= 0x01 // in the last payload chunk, past the header
	require.NoError(t, os.WriteFile(path, ct, 0o600))

	_, err = p.Reveal(context.Background(), "acme", "web", res.Files["pw"].Ref)
	require.Error(t, err)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "cannot be decrypted")
	require.NotEqual(t, sdk.CodeNotFound, sdk.CodeOf(err), "a damaged file is not a missing one")
}

func TestSuppliedValueChangeMakesNewVersion(t *testing.T) {
	t.Parallel()
	p, dir := setup(t)
	ctx := context.Background()
	spec := `{"files":{"api":{"supplied":true}}}`
	first := provision(t, p, "acme", "web", spec, map[string][]byte{"api": []byte("first-value")})
	require.Equal(t, 1, first.Files["api"].Version)

	same := provision(t, p, "acme", "web", spec, map[string][]byte{"api": []byte("first-value")})
	require.Equal(t, first, same, "the same value keeps its version")

	second := provision(t, p, "acme", "web", spec, map[string][]byte{"api": []byte("second-value")})
	require.Equal(t, 2, second.Files["api"].Version)
	require.NotEqual(t, first.Files["api"].Ref, second.Files["api"].Ref)

	v1, err := p.Reveal(ctx, "acme", "web", first.Files["api"].Ref)
	require.NoError(t, err)
	require.Equal(t, "first-value", string(v1))
	v2, err := p.Reveal(ctx, "acme", "web", second.Files["api"].Ref)
	require.NoError(t, err)
	require.Equal(t, "second-value", string(v2))
	require.FileExists(t, filepath.Join(dir, "acme", "web", "api", "v1.age"))
	require.FileExists(t, filepath.Join(dir, "acme", "web", "api", "v2.age"))
}

func TestGeneratedValueIsKeptUntilItsGeneratorChanges(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	ctx := context.Background()
	first := provision(t, p, "acme", "web", `{"files":{"pw":{"generate":{"length":16}}}}`, nil)
	again := provision(t, p, "acme", "web", `{"files":{"pw":{"generate":{"length":16,"encoding":"alphanumeric"}}}}`, nil)
	require.Equal(t, first, again, "alphanumeric is the default encoding: nothing changed")

	longer := provision(t, p, "acme", "web", `{"files":{"pw":{"generate":{"length":32}}}}`, nil)
	require.Equal(t, 2, longer.Files["pw"].Version)
	v, err := p.Reveal(ctx, "acme", "web", longer.Files["pw"].Ref)
	require.NoError(t, err)
	require.Len(t, v, 32)
}

func TestMissingSuppliedValueNamesTheFile(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	_, err := p.Provision(context.Background(), resource.Request{Tenant: "acme", Instance: "web", Type: contract.Secret, Spec: json.RawMessage(`{"files":{"db":{"supplied":true}}}`)})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "request/files/db", sdk.FieldOf(err))
	require.Contains(t, err.Error(), "supply a value")
}

func TestKeyPairResultGivesPublicHalf(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	res := provision(t, p, "acme", "web", `{"files":{"ed":{"generate":{"key_pair":"ed25519"}},"ec":{"generate":{"key_pair":"ecdsa-p256"}}}}`, nil)
	for name, f := range res.Files {
		priv, err := p.Reveal(context.Background(), "acme", "web", f.Ref)
		require.NoError(t, err)
		block, _ := pem.Decode(priv)
		require.NotNil(t, block, name)
		require.Equal(t, "PRIVATE KEY", block.Type)
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err)
		pubBlock, _ := pem.Decode([]byte(f.Public))
		require.NotNil(t, pubBlock, name)
		require.Equal(t, "PUBLIC KEY", pubBlock.Type)
		pub, err := x509.ParsePKIXPublicKey(pubBlock.Bytes)
		require.NoError(t, err)
		require.True(t, pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.(crypto.Signer).Public()), name)
		require.NotContains(t, f.Public, "PRIVATE", name)
	}
}

func TestRevealOnlyToTheOwningInstance(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	ctx := context.Background()
	spec := `{"files":{"pw":{"generate":{"length":16}}}}`
	a := provision(t, p, "acme", "web", spec, nil)
	b := provision(t, p, "bcorp", "web", spec, nil)
	provision(t, p, "acme", "worker", spec, nil)
	ref := b.Files["pw"].Ref

	tests := []struct{ name, tenant, instance, ref string }{
		{"other tenant", "acme", "web", ref},
		{"other instance", "acme", "worker", a.Files["pw"].Ref},
		{"version not there", "acme", "web", strings.Replace(a.Files["pw"].Ref, "@v1", "@v9", 1)},
		{"path escape", "acme", "web", "acme/web/../../bcorp/web/pw@v1"},
		{"not a reference", "acme", "web", "pw"},
	}
	for _, tt := range tests {
		_, err := p.Reveal(ctx, tt.tenant, tt.instance, tt.ref)
		require.Equal(t, sdk.CodeNotFound, sdk.CodeOf(err), tt.name)
	}

	_, err := p.Reveal(ctx, "acme", "web", ref)
	existing := err.Error()
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "bcorp", Instance: "web", Type: contract.Secret}))
	_, err = p.Reveal(ctx, "acme", "web", ref)
	require.Equal(t, existing, err.Error(), "the refusal must not tell whether the secret exists")
}

func TestDeprovision(t *testing.T) {
	t.Parallel()
	p, dir := setup(t)
	ctx := context.Background()
	spec := `{"files":{"pw":{"generate":{"length":16}}}}`
	res := provision(t, p, "acme", "web", spec, nil)
	provision(t, p, "acme", "worker", spec, nil)

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Secret, Retain: true}))
	require.FileExists(t, filepath.Join(dir, "acme", "web", "pw", "v1.age"))
	_, err := p.Reveal(ctx, "acme", "web", res.Files["pw"].Ref)
	require.NoError(t, err, "retain keeps the secrets")

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Secret}))
	require.NoDirExists(t, filepath.Join(dir, "acme", "web"))
	require.DirExists(t, filepath.Join(dir, "acme", "worker"), "other instances stay")
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "web", Type: contract.Secret}), "gone is not an error")

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "acme", Instance: "worker", Type: contract.Secret}))
	require.NoDirExists(t, filepath.Join(dir, "acme"), "the last instance takes its tenant's directory with it")
	require.FileExists(t, filepath.Join(dir, keyFileName))
}

func TestNoPlaintextInDataDir(t *testing.T) {
	t.Parallel()
	p, dir := setup(t)
	ctx := context.Background()
	res := provision(t, p, "acme", "web", secrettest.Request, secrettest.Supplied())
	var values [][]byte
	for _, f := range res.Files {
		v, err := p.Reveal(ctx, "acme", "web", f.Ref)
		require.NoError(t, err)
		values = append(values, v)
		if f.Public != "" {
			block, _ := pem.Decode(v)
			values = append(values, block.Bytes) // the DER key, not only its PEM text
		}
	}
	require.Len(t, res.Files, 6)
	var seen int
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		seen++
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, v := range values {
			require.False(t, bytes.Contains(data, v), "a secret value appears in plain in %s", path)
		}
		return nil
	}))
	require.GreaterOrEqual(t, seen, 13, "key file, and a version and a generator per file")
}
