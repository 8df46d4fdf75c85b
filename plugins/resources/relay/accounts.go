package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/fedhost/fedhost/plugins/resources/internal/atomicfile"
	"github.com/fedhost/fedhost/sdk"
)

// account is one deployment's submission account: it may send as From alone.
type account struct {
	Tenant   string `json:"tenant"`
	Instance string `json:"instance"`
	From     string `json:"from"`
	// Salt and Hash (hex) are SHA-256 over salt and password. The password is 32 bytes
	// from crypto/rand the provider made, so a slow password hash would add nothing but
	// CPU time to every log-in: there is no dictionary to search.
	Salt string `json:"salt"`
	Hash string `json:"hash"`
}

// userName is the account's name: no tenant or instance holds a dot, so no two
// deployments' instances share one.
func userName(tenant, instance string) string { return tenant + "." + instance }

func (a account) user() string { return userName(a.Tenant, a.Instance) }

func (a account) domain() string { return a.From[strings.LastIndexByte(a.From, '@')+1:] }

// matches reports whether password is the account's, in constant time.
func (a account) matches(password string) bool {
	salt, err1 := hex.DecodeString(a.Salt)
	want, err2 := hex.DecodeString(a.Hash)
	if err1 != nil || err2 != nil {
		return false
	}
	got := hashPassword(salt, password)
	return subtle.ConstantTimeCompare(got, want) == 1
}

func hashPassword(salt []byte, password string) []byte {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	return h.Sum(nil)
}

func newAccount(tenant, instance, from, password string) (account, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return account{}, err
	}
	return account{Tenant: tenant, Instance: instance, From: from, Salt: hex.EncodeToString(salt), Hash: hex.EncodeToString(hashPassword(salt, password))}, nil
}

// accounts are the relay's accounts, kept in one file of the data directory and read
// by every session of the listener.
type accounts struct {
	path string

	mu     sync.RWMutex
	byUser map[string]account
}

type accountsFile struct {
	Accounts []account `json:"accounts"`
}

// maxAccountsFile bounds the file read at start: far more than any host's deployments.
const maxAccountsFile = 64 << 20

func openAccounts(path string) (*accounts, error) {
	s := &accounts{path: path, byUser: map[string]account{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the relay's accounts: %w", err)
	}
	if len(b) > maxAccountsFile {
		return nil, fmt.Errorf("the relay's accounts file %s is larger than %d bytes: it is not the plugin's", path, maxAccountsFile)
	}
	var f accountsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("the relay's accounts file %s is not the plugin's JSON (move it away to start without accounts): %w", path, err)
	}
	for _, a := range f.Accounts {
		s.byUser[a.user()] = a
	}
	return s, nil
}

// get returns the account of user.
func (s *accounts) get(user string) (account, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.byUser[user]
	return a, ok
}

// authenticate returns the account when password is user's.
func (s *accounts) authenticate(user, password string) (account, bool) {
	a, ok := s.get(user)
	if !ok {
		// The same work as for an account, so a refusal does not tell which names exist.
		account{Salt: "00", Hash: "00"}.matches(password)
		return account{}, false
	}
	return a, a.matches(password)
}

// heldByOther reports whether another tenant's account has a From domain that is d,
// under d or above it: a domain belongs to one deployment, as the host gives each
// deployment its own.
func (s *accounts) heldByOther(tenant, d string) bool {
	for _, a := range s.byUser {
		if a.Tenant == tenant {
			continue
		}
		o := a.domain()
		if o == d || strings.HasSuffix(o, "."+d) || strings.HasSuffix(d, "."+o) {
			return true
		}
	}
	return false
}

// put stores a, refusing a From domain another tenant holds.
func (s *accounts) put(a account) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heldByOther(a.Tenant, a.domain()) {
		return sdk.Conflict("the domain of the From address, or a domain under or above it, is held by the relay account of another deployment: a deployment sends only from its own domain; ask with the deployment's domain")
	}
	old, had := s.byUser[a.user()]
	s.byUser[a.user()] = a
	if err := s.save(); err != nil {
		if had {
			s.byUser[a.user()] = old
		} else {
			delete(s.byUser, a.user())
		}
		return err
	}
	return nil
}

// remove forgets the account of tenant and instance; a missing one is no error.
func (s *accounts) remove(tenant, instance string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := userName(tenant, instance)
	old, had := s.byUser[user]
	if !had {
		return nil
	}
	delete(s.byUser, user)
	if err := s.save(); err != nil {
		s.byUser[user] = old
		return err
	}
	return nil
}

// save writes every account; s.mu is held.
func (s *accounts) save() error {
	f := accountsFile{Accounts: make([]account, 0, len(s.byUser))}
	for _, a := range s.byUser {
		f.Accounts = append(f.Accounts, a)
	}
	sort.Slice(f.Accounts, func(i, j int) bool { return f.Accounts[i].user() < f.Accounts[j].user() })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, b, 0o600); err != nil {
		return fmt.Errorf("writing the relay's accounts: %w", err)
	}
	return nil
}
