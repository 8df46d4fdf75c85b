package migration

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func payload() Payload {
	return Payload{
		ID: strings.Repeat("ab", 16), CreatedAt: now, ExpiresAt: now.Add(72 * time.Hour),
		Source:          Source{URL: "https://fedhost.a.example/", ConfirmToken: strings.Repeat("t", 43)},
		Deployment:      Deployment{ID: "d1", Name: "Acme", Namespace: "acme"},
		CatalogRevision: "r1", Versions: map[string]string{"miniflux": "2.2.6"},
		Config:  json.RawMessage(`{"apps":{"miniflux":{"enable":true}}}`),
		Secrets: map[string]string{"/apps/miniflux/options/smtp/password": "hunter22"},
		Apps: map[string]AppData{"miniflux": {Version: "2.2.6", RepositoryPassword: "repo-pass", Snapshot: "0123abcd",
			S3: S3{Endpoint: "http://127.0.0.1:7070", Bucket: "acme-backups", Path: "miniflux", AccessKeyID: "ro", SecretAccessKey: "ro-secret"}}},
		Directory: &Directory{Users: []User{{Name: "alice", PasswordHash: "{SSHA}abc"}}, Groups: []Group{{Name: "miniflux-users", Members: []string{"alice"}}}},
		Domain:    Domain{Name: "acme.test", Registered: true, AuthCode: "auth-code-1"},
	}
}

func keys(t *testing.T) *Keys {
	k, err := LoadKeys(t.TempDir())
	require.NoError(t, err)
	return k
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := keys(t)
	s, err := Seal(payload(), k.Recipient())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(s, Prefix))
	for _, secret := range []string{"hunter22", "repo-pass", "ro-secret", "auth-code-1", "{SSHA}abc", "acme.test"} {
		require.NotContains(t, s, secret)
		raw, _ := base64.RawURLEncoding.DecodeString(s[len(Prefix):])
		require.NotContains(t, string(raw), secret, "the string is encrypted, not encoded")
	}
	got, err := k.Open(s+"\n", now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, payload().Apps, got.Apps)
	require.Equal(t, payload().Directory, got.Directory)
	require.JSONEq(t, string(payload().Config), string(got.Config))
}

func TestOpenRefuses(t *testing.T) {
	k := keys(t)
	s, err := Seal(payload(), k.Recipient())
	require.NoError(t, err)
	other := keys(t)
	edited := []byte(s)
	// A base64url character in the body replaced by another one: flipping a bit could make a
	// character outside the alphabet ('-' to ',', 'z' to '{'), a format error and not an edit.
	if edited[len(edited)-10] == 'A' {
		edited[len(edited)-10] = 'B'
	} else {
		edited[len(edited)-10] = 'A'
	}
	expired := payload()
	expired.CreatedAt, expired.ExpiresAt = now.Add(-48*time.Hour), now.Add(-time.Hour)
	es, err := Seal(expired, k.Recipient())
	require.NoError(t, err)
	for _, c := range []struct {
		name, s string
		want    error
	}{
		{"not one", "hello", ErrFormat},
		{"future version", "fedhost-migration-2:" + s[len(Prefix):], ErrVersion},
		{"bad base64", Prefix + "!!!", ErrFormat},
		{"another target", mustSeal(t, other.Recipient()), ErrNotOurs},
		{"edited", string(edited), ErrNotOurs},
		{"truncated", s[:len(s)-40], ErrNotOurs},
		{"expired", es, ErrExpired},
	} {
		_, err := k.Open(c.s, now)
		require.ErrorIs(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), s[len(Prefix):len(Prefix)+20], "%s: the error does not quote the string", c.name)
	}
}

func mustSeal(t *testing.T, recipient string) string {
	s, err := Seal(payload(), recipient)
	require.NoError(t, err)
	return s
}

func TestValidateNamesTheField(t *testing.T) {
	cases := map[string]func(*Payload){
		"id":                   func(p *Payload) { p.ID = "x" },
		"expires_at":           func(p *Payload) { p.ExpiresAt = p.CreatedAt.Add(MaxTTL + time.Hour) },
		"source/confirm_token": func(p *Payload) { p.Source.ConfirmToken = "short" },
		"config":               func(p *Payload) { p.Config = json.RawMessage(`{`) },
		"apps/miniflux":        func(p *Payload) { a := p.Apps["miniflux"]; a.Snapshot = ""; p.Apps["miniflux"] = a },
		"apps/miniflux/s3":     func(p *Payload) { a := p.Apps["miniflux"]; a.S3.AccessKeyID = ""; p.Apps["miniflux"] = a },
		"directory/users/0":    func(p *Payload) { p.Directory.Users[0].Name = strings.Repeat("a", 65) },
	}
	for field, edit := range cases {
		p := payload()
		edit(&p)
		err := p.Validate()
		require.ErrorIs(t, err, ErrInvalid, field)
		require.Contains(t, err.Error(), field)
	}
	require.NoError(t, payload().Validate())
}

func TestParseRecipientRefusesOthers(t *testing.T) {
	_, err := ParseRecipient("age1qqqq")
	require.ErrorContains(t, err, "GET /api/v1/migration/recipient")
	_, err = ParseRecipient(strings.Repeat("a", 5000))
	require.Error(t, err)
	_, err = ParseRecipient(keys(t).Recipient())
	require.NoError(t, err)
}

func TestKeysPersistAndRefuseAReadableFile(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadKeys(dir)
	require.NoError(t, err)
	b, err := LoadKeys(dir)
	require.NoError(t, err)
	require.Equal(t, a.Recipient(), b.Recipient(), "the identity is kept")
	s, err := Seal(payload(), a.Recipient())
	require.NoError(t, err)
	_, err = b.Open(s, now)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(filepath.Join(dir, KeyFileName), 0o644))
	_, err = LoadKeys(dir)
	require.ErrorContains(t, err, "chmod 600")
	require.False(t, errors.Is(err, ErrFormat))
}

func FuzzOpen(f *testing.F) {
	k, err := LoadKeys(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	s, err := Seal(payload(), k.Recipient())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s)
	f.Add("fedhost-migration-1:")
	f.Add("fedhost-migration-99:AAAA")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := k.Open(in, now)
		if err == nil {
			require.NoError(t, p.Validate(), "what Open accepts is valid")
		}
	})
}
