// Package migration is the migration string an operator carries from one fedhost to
// another when switching hosting provider (docs/migration.md).
//
// A string is the text "fedhost-migration-1:" followed by the unpadded base64url of an age
// file (age-encryption.org/v1) encrypted to the target's recipient, a post-quantum hybrid
// age key the target publishes at GET /api/v1/migration/recipient. Inside is a Payload as
// JSON. age authenticates the whole file, so a string edited anywhere fails to open, and
// one encrypted to another fedhost opens nowhere else: a leaked string gives nothing to
// anyone but its target.
//
// The number after "fedhost-migration-" is the format version; Open refuses any other.
// Within a version fields are only ever added, never renamed or given another meaning.
package migration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"filippo.io/age"
)

// Version is the format version Seal writes and Open reads.
const Version = 1

// Prefix starts every string of this version.
const Prefix = "fedhost-migration-1:"

// MaxLen bounds a string (and so what Open decrypts and parses): 4 MiB, room for a
// directory of tens of thousands of users.
const MaxLen = 4 << 20

// MaxTTL is the longest a string may live.
const MaxTTL = 30 * 24 * time.Hour

// Payload is what a string carries. Every secret in it (keys, passwords, hashes, the
// auth code, the confirmation token) exists only inside the encrypted string.
type Payload struct {
	// ID names this migration at both ends (random, 32 hex digits).
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Source    Source    `json:"source"`
	// Deployment is what the source deployment was.
	Deployment Deployment `json:"deployment"`
	// CatalogRevision is the source's catalog revision the configuration was made for,
	// and Versions each enabled app's version there.
	CatalogRevision string            `json:"catalog_revision"`
	Versions        map[string]string `json:"versions"`
	// Config is the deployment's configuration (catalog.Config JSON) without secrets;
	// Secrets holds the values the operator typed, by JSON pointer. No provider setting
	// is in either: those belong to the source's fedhost.hcl.
	Config  json.RawMessage   `json:"config"`
	Secrets map[string]string `json:"secrets,omitempty"`
	// Apps holds, per app with data, where its final snapshot is.
	Apps map[string]AppData `json:"apps,omitempty"`
	// Directory is the deployment's users and groups, when it has a directory.
	Directory *Directory `json:"directory,omitempty"`
	// Domain is the domain and, when the source's registrar held it, its auth code.
	Domain Domain `json:"domain"`
}

// Source says where the string came from and how to tell it the import is done.
type Source struct {
	// URL is the source fedhost's public URL; the target posts
	// {"id", "token"} to URL/api/v1/migration/confirm after a successful import.
	URL string `json:"url"`
	// ConfirmToken proves the confirmation (the source keeps only its hash).
	ConfirmToken string `json:"confirm_token"`
	// FedhostVersion is the source host's version, for the record.
	FedhostVersion string `json:"fedhost_version,omitempty"`
}

// Deployment is the source deployment's identity.
type Deployment struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	TimeZone  string `json:"time_zone,omitempty"`
}

// AppData is an app's final snapshot: a restic repository on S3 that the read-only key
// may read until the string expires.
type AppData struct {
	Version string `json:"version"`
	S3      S3     `json:"s3"`
	// RepositoryPassword opens the restic repository; Snapshot is the id of the backup
	// (the database snapshot, which names its files snapshot).
	RepositoryPassword string `json:"repository_password"`
	Snapshot           string `json:"snapshot"`
}

// S3 is a read-only way into a backups bucket.
type S3 struct {
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region,omitempty"`
	PathStyle       bool   `json:"path_style,omitempty"`
	Bucket          string `json:"bucket"`
	Path            string `json:"path"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
}

// Directory is a deployment's users and groups. Password hashes travel as the directory
// stored them (RFC 3112 userPassword values such as {SSHA}..., {ARGON2}...), so that
// nobody must reset.
type Directory struct {
	Users  []User  `json:"users"`
	Groups []Group `json:"groups"`
}

// User is one user of the directory.
type User struct {
	Name         string `json:"name"`
	DisplayName  string `json:"display_name,omitempty"`
	Email        string `json:"email,omitempty"`
	Disabled     bool   `json:"disabled,omitempty"`
	PasswordHash string `json:"password_hash,omitempty"`
}

// Group is one group and its members' user names.
type Group struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Members     []string `json:"members"`
}

// Domain is the deployment's domain. AuthCode is set when the source's registrar held
// the domain and released it for the transfer; Registered says it was registered
// through the source (else it is the operator's own, delegated).
type Domain struct {
	Name       string `json:"name"`
	Registered bool   `json:"registered,omitempty"`
	AuthCode   string `json:"auth_code,omitempty"`
}

// Reasons Open refuses a string. Each error Open returns wraps one of them; none quotes
// the string.
var (
	ErrFormat  = errors.New("not a fedhost migration string")
	ErrVersion = errors.New("a migration string of a format version this fedhost does not read")
	ErrNotOurs = errors.New("a migration string encrypted to another fedhost, or edited")
	ErrExpired = errors.New("an expired migration string")
	ErrInvalid = errors.New("a migration string with invalid content")
)

var (
	versioned = regexp.MustCompile(`^fedhost-migration-([0-9]{1,6}):`)
	hexID     = regexp.MustCompile(`^[0-9a-f]{32}$`)
	appName   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
)

// Seal encrypts p to recipient (the target's published age recipient) and returns the
// string.
func Seal(p Payload, recipient string) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	r, err := ParseRecipient(recipient)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, r)
	if err != nil {
		return "", fmt.Errorf("encrypting the migration string: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return "", fmt.Errorf("encrypting the migration string: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("encrypting the migration string: %w", err)
	}
	s := Prefix + base64.RawURLEncoding.EncodeToString(out.Bytes())
	if len(s) > MaxLen {
		return "", fmt.Errorf("%w: the migration string would be %d bytes, over the limit of %d", ErrInvalid, len(s), MaxLen)
	}
	return s, nil
}

// ParseRecipient reads a target's recipient (age1pq1...).
func ParseRecipient(s string) (age.Recipient, error) {
	s = strings.TrimSpace(s)
	if len(s) > 4096 {
		return nil, fmt.Errorf("the recipient is %d bytes, longer than any age recipient: give the one GET /api/v1/migration/recipient answers", len(s))
	}
	r, err := age.ParseHybridRecipient(s)
	if err != nil {
		return nil, errors.New("the recipient is not an age post-quantum (age1pq1...) recipient: give the one the target's GET /api/v1/migration/recipient answers")
	}
	return r, nil
}

// Open decrypts s with the target's identity and checks it, at now. It refuses a string
// that is not one, of another format version, not encrypted to identity or edited,
// expired, or whose content breaks the format's rules.
func Open(s string, identity age.Identity, now time.Time) (Payload, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		return Payload{}, fmt.Errorf("%w: it is longer than %d bytes", ErrFormat, MaxLen)
	}
	m := versioned.FindStringSubmatch(s)
	if m == nil {
		return Payload{}, fmt.Errorf("%w: it must start with %q", ErrFormat, Prefix)
	}
	if m[0] != Prefix {
		return Payload{}, fmt.Errorf("%w: it is of format version %s, this fedhost reads version %d; export again from a source that writes version %d, or update this fedhost", ErrVersion, m[1], Version, Version)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s[len(Prefix):])
	if err != nil {
		return Payload{}, fmt.Errorf("%w: the text after %q is not unpadded base64url (copied incompletely?)", ErrFormat, Prefix)
	}
	r, err := age.Decrypt(bytes.NewReader(raw), identity)
	if err != nil {
		return Payload{}, fmt.Errorf("%w: it does not open with this fedhost's key; export again to this fedhost's recipient", ErrNotOurs)
	}
	body, err := io.ReadAll(io.LimitReader(r, MaxLen+1))
	if err != nil {
		// age checks each chunk's tag as it reads: an edit inside the body shows here.
		return Payload{}, fmt.Errorf("%w: its content fails age's integrity check", ErrNotOurs)
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p); err != nil {
		return Payload{}, fmt.Errorf("%w: its content is not a version %d payload", ErrInvalid, Version)
	}
	if err := p.Validate(); err != nil {
		return Payload{}, err
	}
	if !now.Before(p.ExpiresAt) {
		return Payload{}, fmt.Errorf("%w: it expired at %s; export again at the source", ErrExpired, p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// Validate checks the format's rules: the fields that must be there, their shapes and
// their bounds. Its errors name the field and wrap ErrInvalid.
func (p Payload) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	switch {
	case !hexID.MatchString(p.ID):
		return bad("id", "must be 32 lower-case hex digits")
	case p.CreatedAt.IsZero() || p.ExpiresAt.IsZero() || !p.ExpiresAt.After(p.CreatedAt):
		return bad("expires_at", "must be after created_at")
	case p.ExpiresAt.Sub(p.CreatedAt) > MaxTTL:
		return bad("expires_at", "must be at most %s after created_at", MaxTTL)
	case len(p.Source.ConfirmToken) < 32 || len(p.Source.ConfirmToken) > 128:
		return bad("source/confirm_token", "must be 32 to 128 characters")
	case !bounded(p.Source.URL, 2048) || !bounded(p.Source.FedhostVersion, 128):
		return bad("source", "has a field over its bound")
	case !bounded(p.Deployment.ID, 64) || !bounded(p.Deployment.Name, 128) || !bounded(p.Deployment.Namespace, 63) || !bounded(p.Deployment.TimeZone, 64):
		return bad("deployment", "has a field over its bound")
	case p.Deployment.Namespace == "":
		return bad("deployment/namespace", "is missing")
	case !bounded(p.CatalogRevision, 128) || p.CatalogRevision == "":
		return bad("catalog_revision", "must be 1 to 128 characters")
	case len(p.Config) == 0 || !json.Valid(p.Config) || len(p.Config) > 256<<10:
		return bad("config", "must be a JSON document of at most 256 KiB")
	case !bounded(p.Domain.Name, 253) || !bounded(p.Domain.AuthCode, 256):
		return bad("domain", "has a field over its bound")
	}
	for app, v := range p.Versions {
		if !appName.MatchString(app) || v == "" || !bounded(v, 64) {
			return bad("versions", "must map app names to versions of at most 64 characters")
		}
	}
	for ptr, v := range p.Secrets {
		if !strings.HasPrefix(ptr, "/") || !bounded(ptr, 512) || !bounded(v, 64<<10) {
			return bad("secrets", "must map JSON pointers to values of at most 64 KiB")
		}
	}
	for app, a := range p.Apps {
		field := "apps/" + app
		switch {
		case !appName.MatchString(app):
			return bad("apps", "has a key that is not an app name")
		case a.Snapshot == "" || !bounded(a.Snapshot, 64) || a.RepositoryPassword == "" || !bounded(a.RepositoryPassword, 1024):
			return bad(field, "needs a snapshot id and a repository password")
		case a.S3.Endpoint == "" || a.S3.Bucket == "" || a.S3.AccessKeyID == "" || a.S3.SecretAccessKey == "":
			return bad(field+"/s3", "needs an endpoint, a bucket and a key")
		case !bounded(a.S3.Endpoint, 2048) || !bounded(a.S3.Bucket, 63) || !bounded(a.S3.Path, 512) || !bounded(a.S3.Region, 64) ||
			!bounded(a.S3.AccessKeyID, 256) || !bounded(a.S3.SecretAccessKey, 1024) || !bounded(a.Version, 64):
			return bad(field, "has a field over its bound")
		}
	}
	if d := p.Directory; d != nil {
		if len(d.Users) > 1_000_000 || len(d.Groups) > 100_000 {
			return bad("directory", "holds more users or groups than a directory can")
		}
		for i, u := range d.Users {
			if u.Name == "" || !bounded(u.Name, 64) || !bounded(u.DisplayName, 256) || !bounded(u.Email, 254) || !bounded(u.PasswordHash, 1024) {
				return bad(fmt.Sprintf("directory/users/%d", i), "has a missing or over-long field")
			}
		}
		for i, g := range d.Groups {
			if g.Name == "" || !bounded(g.Name, 64) || !bounded(g.Description, 1024) {
				return bad(fmt.Sprintf("directory/groups/%d", i), "has a missing or over-long field")
			}
			for _, m := range g.Members {
				if m == "" || !bounded(m, 64) {
					return bad(fmt.Sprintf("directory/groups/%d/members", i), "has a missing or over-long name")
				}
			}
		}
	}
	return nil
}

func bounded(s string, n int) bool { return len(s) <= n }
