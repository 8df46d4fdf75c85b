package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
)

// clientRecord is a registered client as the data dir keeps it: the secret only as its
// SHA-256 (the host holds the value).
type clientRecord struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	SecretHash    []byte   `json:"secret_sha256"`
	RedirectURIs  []string `json:"redirect_uris"`
	Scopes        []string `json:"scopes"`
	AllowedGroups []string `json:"allowed_groups,omitempty"`
}

func (c *clientRecord) secretMatches(secret string) bool {
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], c.SecretHash) == 1
}

// tenantRecord is what survives a restart of one deployment: its file in the data dir.
type tenantRecord struct {
	Tenant    string                   `json:"tenant"`
	Issuer    string                   `json:"issuer"`
	Directory directoryConfig          `json:"directory"`
	Clients   map[string]*clientRecord `json:"clients"`
	Keys      []signingKey             `json:"keys"`
}

// tenant is one deployment's provider: its record, the sign-ins and tokens in memory,
// and the op.Provider serving its issuer, made on the first request.
type tenant struct {
	name     string
	path     string
	rotation time.Duration
	now      func() time.Time

	mu  sync.RWMutex
	rec tenantRecord
	// hostName is the host key of rec.Issuer, which requests are dispatched by.
	hostName string
	dir      *directory
	provider *op.Provider
	cryptoK  [32]byte

	authRequests map[string]*authRequest
	codes        map[string]string
	tokens       map[string]*accessToken
	refresh      map[[32]byte]*refreshToken
	sessions     map[[32]byte]*session
}

func newTenant(path string, rec tenantRecord, rotation time.Duration, now func() time.Time) *tenant {
	if rec.Clients == nil {
		rec.Clients = map[string]*clientRecord{}
	}
	hostName, _ := issuerHost(rec.Issuer)
	t := &tenant{
		name: rec.Tenant, path: path, rotation: rotation, now: now, rec: rec, hostName: hostName,
		dir:          &directory{cfg: rec.Directory},
		authRequests: map[string]*authRequest{},
		codes:        map[string]string{},
		tokens:       map[string]*accessToken{},
		refresh:      map[[32]byte]*refreshToken{},
		sessions:     map[[32]byte]*session{},
	}
	// Access tokens and codes are encrypted with a key of this process: they do not
	// outlive it, as the sign-ins they belong to do not.
	_, _ = cryptoRand(t.cryptoK[:])
	return t
}

// save writes the record, 0600, replacing the file at once. Callers hold mu.
func (t *tenant) save() error {
	b, err := json.Marshal(t.rec)
	if err != nil {
		return err
	}
	return atomicfile.Write(t.path, b, 0o600)
}

// loadTenants reads every deployment's file in dir/tenants.
func loadTenants(dir string, rotation time.Duration, now func() time.Time) (map[string]*tenant, error) {
	tdir := filepath.Join(dir, "tenants")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(tdir)
	if err != nil {
		return nil, err
	}
	out := map[string]*tenant{}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		path := filepath.Join(tdir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var rec tenantRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, &fileError{path: path}
		}
		for i := range rec.Keys {
			if err := rec.Keys[i].load(); err != nil {
				return nil, &fileError{path: path}
			}
		}
		out[rec.Tenant] = newTenant(path, rec, rotation, now)
	}
	return out, nil
}

type fileError struct{ path string }

func (e *fileError) Error() string {
	return e.path + " is not a deployment's record: remove it and provision the deployment's oidc resources again"
}

// sweep drops the sign-ins, codes and tokens that have expired.
func (t *tenant) sweep() {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, a := range t.authRequests {
		if now.After(a.Created.Add(authRequestLifetime)) {
			delete(t.authRequests, id)
			if a.code != "" {
				delete(t.codes, a.code)
			}
		}
	}
	for id, a := range t.tokens {
		if now.After(a.Expiry) {
			delete(t.tokens, id)
		}
	}
	for h, r := range t.refresh {
		if now.After(r.Expiry) {
			delete(t.refresh, h)
		}
	}
	for h, ss := range t.sessions {
		if now.After(ss.expiry) {
			delete(t.sessions, h)
		}
	}
}

// newSession keeps u signed in at the issuer and returns the cookie's value; "" when
// too many sessions are live, and the user simply signs in again next time.
func (t *tenant) newSession(u user, authTime time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sessions) >= maxTokens {
		return ""
	}
	v := rand.Text() + rand.Text()
	t.sessions[sha256.Sum256([]byte(v))] = &session{user: u, authTime: authTime, expiry: authTime.Add(sessionLifetime)}
	return v
}

// sessionOf is the live session of a cookie's value.
func (t *tenant) sessionOf(v string) *session {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ss, ok := t.sessions[sha256.Sum256([]byte(v))]
	if !ok || t.now().After(ss.expiry) {
		return nil
	}
	return ss
}

func (t *tenant) endSession(v string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, sha256.Sum256([]byte(v)))
}

// currentKeys returns the signing key and the published keys, rotating first when due (and
// keeping the new set on disk).
func (t *tenant) currentKeys() (*signingKey, []signingKey, error) {
	now := t.now()
	t.mu.RLock()
	active := activeKey(t.rec.Keys)
	if active != nil && now.Sub(active.Created) < t.rotation && !t.retiredExpired(now) {
		keys := t.rec.Keys
		t.mu.RUnlock()
		return active, keys, nil
	}
	t.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	keys, changed, err := rotate(slices.Clone(t.rec.Keys), now, t.rotation)
	if err != nil {
		return nil, nil, err
	}
	if changed {
		old := t.rec.Keys
		t.rec.Keys = keys
		if err := t.save(); err != nil {
			t.rec.Keys = old
			return nil, nil, err
		}
	}
	return activeKey(t.rec.Keys), t.rec.Keys, nil
}

func (t *tenant) retiredExpired(now time.Time) bool {
	for _, k := range t.rec.Keys {
		if !k.Retired.IsZero() && now.Sub(k.Retired) >= keyRetention {
			return true
		}
	}
	return false
}

func (t *tenant) client(id string) *clientRecord {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.rec.Clients[id]
}

// appName is the client's app name for the log-in page.
func (t *tenant) appName(clientID string) string {
	if c := t.client(clientID); c != nil {
		return c.Name
	}
	return "the app"
}

func (t *tenant) directory() *directory {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.dir
}

func (t *tenant) issuer() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.rec.Issuer
}

// complete marks a sign-in done as u; false when it has gone meanwhile.
func (t *tenant) complete(id string, u user, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.authRequests[id]
	if !ok {
		return false
	}
	a.user, a.done, a.authTime = u, true, now
	return true
}

// handler is the op.Provider of the tenant's issuer, made on first use.
func (t *tenant) handler() (*op.Provider, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.provider != nil {
		return t.provider, nil
	}
	cfg := &op.Config{
		CryptoKey:                t.cryptoK,
		DefaultLogoutRedirectURI: signedOutPath,
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedScopes:          []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail, scopeGroups, oidc.ScopeOfflineAccess},
		SupportedClaims: []string{"sub", "aud", "exp", "iat", "iss", "auth_time", "nonce", "amr", "at_hash", "c_hash", "azp",
			"preferred_username", "name", "given_name", "family_name", "email", "email_verified", "groups"},
	}
	// op's own log would carry requests; the plugin logs what it decides itself.
	p, err := op.NewProvider(cfg, t, op.StaticIssuer(t.rec.Issuer), op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	t.provider = p
	return p, nil
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func (t *tenant) setRotation(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rotation = d
}

// host is the host key of the tenant's issuer.
func (t *tenant) host() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.hostName
}

// register keeps client, the issuer and the directory, merges the keys the host handed
// back with those kept, rotates when due and saves. It returns the key set to hand back.
func (t *tenant) register(issuer string, dir directoryConfig, c *clientRecord, given []signingKey) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.rec
	oldClients := make(map[string]*clientRecord, len(t.rec.Clients))
	for k, v := range t.rec.Clients {
		oldClients[k] = v
	}
	oldHost := t.hostName
	if t.rec.Issuer != issuer {
		t.rec.Issuer = issuer
		t.hostName, _ = issuerHost(issuer)
		t.provider = nil
	}
	if t.rec.Directory != dir {
		t.rec.Directory = dir
		t.dir.close()
		t.dir = &directory{cfg: dir}
	}
	t.rec.Clients[c.ID] = c
	keys, _, err := rotate(mergeKeys(t.rec.Keys, given), t.now(), t.rotation)
	if err != nil {
		return nil, err
	}
	t.rec.Keys = keys
	if err := t.save(); err != nil {
		t.rec = old
		t.rec.Clients = oldClients
		t.hostName = oldHost
		return nil, err
	}
	return encodeKeySet(t.rec.Keys)
}

// unregister removes a client and its tokens; it returns how many clients are left.
func (t *tenant) unregister(id string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.rec.Clients[id]
	if !ok {
		return len(t.rec.Clients), nil
	}
	delete(t.rec.Clients, id)
	if len(t.rec.Clients) > 0 {
		if err := t.save(); err != nil {
			t.rec.Clients[id] = c
			return 0, err
		}
	}
	for k, a := range t.tokens {
		if a.ClientID == id {
			delete(t.tokens, k)
		}
	}
	for k, r := range t.refresh {
		if r.ClientID == id {
			delete(t.refresh, k)
		}
	}
	return len(t.rec.Clients), nil
}
