// Package kvtest is an HTTP server that follows the OpenBao KV v2 secrets engine API
// (OpenBao 2.x, "KV secrets engine - version 2 (API)", openbao.org/api-docs/secret/kv/kv-v2)
// for tests, since no OpenBao server can be had on these machines. It keeps one KV v2
// mount in memory and serves:
//
//   - GET /v1/<mount>/data/<path>[?version=N]: read the current or a given version
//   - POST or PUT /v1/<mount>/data/<path>: write a new version, honouring options.cas
//   - GET /v1/<mount>/metadata/<path>: read the key's metadata and versions
//   - LIST /v1/<mount>/metadata/<path> (or GET with ?list=true): list keys below a folder
//   - DELETE /v1/<mount>/metadata/<path>: delete the key, all versions and metadata
//   - GET /v1/auth/token/lookup-self: the token's own properties (the default policy)
//
// Requests carry a token in X-Vault-Token. Each token holds grants (a path prefix within
// the mount and capabilities on it, the most specific prefix winning), standing in for
// its ACL policies. OpenBao answers both refusals 403 but words them differently: a token
// it does not know (wrong, expired, revoked) gets {"errors":["permission denied"]}, and a
// known token its policies do not allow gets the multierror text
// {"errors":["1 error occurred:\n\t* permission denied\n\n"]}; newer Vault releases add
// "invalid token" to the first (AnswerLikeVault). A missing path gets 404 {"errors":[]}.
// Responses use the API's envelope. Like OpenBao, a key keeps at most 10 versions.
package kvtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxVersions is OpenBao's default number of versions kept per key.
const maxVersions = 10

// Server is a running KV v2 test server; URL is its address (http://127.0.0.1:port).
type Server struct {
	*httptest.Server
	mount string

	mu     sync.Mutex
	tokens map[string][]grant
	keys   map[string]*key
	vault  bool
}

// grant is one rule of a token's policy: capabilities on the paths below prefix.
type grant struct {
	prefix       string
	capabilities map[string]bool
}

// The capabilities of an ACL policy that the KV v2 paths use.
const (
	Create = "create"
	Read   = "read"
	Update = "update"
	Delete = "delete"
	List   = "list"
)

// The answers to a refused token, as OpenBao words them (see the package doc).
const (
	deniedUnknownToken = "permission denied"
	deniedByPolicy     = "1 error occurred:\n\t* permission denied\n\n"
	deniedVaultInvalid = "2 errors occurred:\n\t* permission denied\n\t* invalid token\n\n"
)

type key struct {
	created  time.Time
	updated  time.Time
	current  int
	oldest   int
	versions map[int]*version
}

type version struct {
	data    map[string]any
	created time.Time
}

// New starts a server with one KV v2 mount at mount (such as "secret"). tokens maps each
// accepted token to the path prefix within the mount it may use with every capability
// ("" for all of it).
func New(mount string, tokens map[string]string) *Server {
	s := &Server{mount: strings.Trim(mount, "/"), tokens: map[string][]grant{}, keys: map[string]*key{}}
	for t, p := range tokens {
		s.AddToken(t, p)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddToken accepts token for paths below prefix, with every capability.
func (s *Server) AddToken(token, prefix string) {
	s.Grant(token, prefix, Create, Read, Update, Delete, List)
}

// Grant accepts token and gives it capabilities on the paths below prefix; where several
// grants of a token match a path, the longest prefix decides, as in an ACL policy.
func (s *Server) Grant(token, prefix string, capabilities ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := grant{prefix: prefix, capabilities: map[string]bool{}}
	for _, c := range capabilities {
		g.capabilities[c] = true
	}
	s.tokens[token] = append(s.tokens[token], g)
}

// Revoke forgets token, as OpenBao forgets a token that expired or was revoked.
func (s *Server) Revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

// AnswerLikeVault words the refusal of an unknown token as newer Vault releases do,
// with "invalid token" beside "permission denied".
func (s *Server) AnswerLikeVault() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vault = true
}

// Keys lists every key path stored, sorted; for tests that look at the server's state.
func (s *Server) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	token := r.Header.Get("X-Vault-Token")
	if r.URL.Path == "/v1/auth/token/lookup-self" && r.Method == http.MethodGet {
		s.lookupSelf(w, token)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"+s.mount+"/")
	if !ok {
		writeErrors(w, http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", strings.TrimPrefix(r.URL.Path, "/v1/")))
		return
	}
	kind, path, _ := strings.Cut(rest, "/")
	list := r.Method == "LIST" || (r.Method == http.MethodGet && r.URL.Query().Get("list") == "true")
	var capability string
	switch {
	case kind == "data" && r.Method == http.MethodGet, kind == "metadata" && r.Method == http.MethodGet && !list:
		capability = Read
	case kind == "data" && (r.Method == http.MethodPost || r.Method == http.MethodPut):
		// KV v2's existence check: a write to a key that exists is an update.
		capability = Create
		if s.keys[path] != nil {
			capability = Update
		}
	case kind == "metadata" && list:
		capability = List
	case kind == "metadata" && r.Method == http.MethodDelete:
		capability = Delete
	}
	if !s.known(token) {
		s.deniedUnknown(w)
		return
	}
	if capability != "" && !s.allowed(token, path, capability) {
		writeErrors(w, http.StatusForbidden, deniedByPolicy)
		return
	}
	switch {
	case kind == "data" && r.Method == http.MethodGet:
		s.read(w, r, path)
	case kind == "data" && (r.Method == http.MethodPost || r.Method == http.MethodPut):
		s.write(w, r, path)
	case kind == "metadata" && list:
		s.list(w, path)
	case kind == "metadata" && r.Method == http.MethodGet:
		s.metadata(w, path)
	case kind == "metadata" && r.Method == http.MethodDelete:
		delete(s.keys, strings.TrimSuffix(path, "/"))
		w.WriteHeader(http.StatusNoContent)
	case kind == "data" || kind == "metadata":
		writeErrors(w, http.StatusMethodNotAllowed, "unsupported operation")
	default:
		writeErrors(w, http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", strings.TrimPrefix(r.URL.Path, "/v1/")))
	}
}

func (s *Server) known(token string) bool {
	_, ok := s.tokens[token]
	return ok && token != ""
}

func (s *Server) deniedUnknown(w http.ResponseWriter) {
	if s.vault {
		writeErrors(w, http.StatusForbidden, deniedVaultInvalid)
		return
	}
	writeErrors(w, http.StatusForbidden, deniedUnknownToken)
}

// allowed stands in for the token's ACL policy: of its grants whose prefix leads the
// path, the longest decides.
func (s *Server) allowed(token, path, capability string) bool {
	best := -1
	ok := false
	for _, g := range s.tokens[token] {
		if !strings.HasPrefix(path, g.prefix) && !strings.HasPrefix(path+"/", g.prefix) {
			continue
		}
		if len(g.prefix) > best {
			best, ok = len(g.prefix), g.capabilities[capability]
		}
	}
	return ok
}

// lookupSelf answers GET auth/token/lookup-self, which the default policy grants every
// token: its properties, or the unknown token's refusal.
func (s *Server) lookupSelf(w http.ResponseWriter, token string) {
	if !s.known(token) {
		s.deniedUnknown(w)
		return
	}
	writeData(w, map[string]any{
		"accessor":     "accessor-" + strconv.Itoa(len(token)),
		"display_name": "token",
		"entity_id":    "",
		"expire_time":  nil,
		"id":           token,
		"num_uses":     0,
		"orphan":       false,
		"path":         "auth/token/create",
		"policies":     []string{"default", "fedhost"},
		"renewable":    false,
		"ttl":          0,
		"type":         "service",
	})
}

func (s *Server) read(w http.ResponseWriter, r *http.Request, path string) {
	k := s.keys[path]
	if k == nil {
		writeErrors(w, http.StatusNotFound)
		return
	}
	n := k.current
	if q := r.URL.Query().Get("version"); q != "" && q != "0" {
		v, err := strconv.Atoi(q)
		if err != nil {
			writeErrors(w, http.StatusBadRequest, "error converting input version for field \"version\"")
			return
		}
		n = v
	}
	v := k.versions[n]
	if v == nil {
		writeErrors(w, http.StatusNotFound)
		return
	}
	writeData(w, map[string]any{"data": v.data, "metadata": versionMetadata(n, v)})
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, path string) {
	if path == "" || strings.HasSuffix(path, "/") {
		writeErrors(w, http.StatusBadRequest, "invalid key")
		return
	}
	var body struct {
		Data    map[string]any `json:"data"`
		Options struct {
			CAS *int `json:"cas"`
		} `json:"options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeErrors(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
		return
	}
	if body.Data == nil {
		writeErrors(w, http.StatusBadRequest, "no data provided")
		return
	}
	k := s.keys[path]
	current := 0
	if k != nil {
		current = k.current
	}
	if body.Options.CAS != nil && *body.Options.CAS != current {
		writeErrors(w, http.StatusBadRequest, "check-and-set parameter did not match the current version")
		return
	}
	now := time.Now().UTC()
	if k == nil {
		k = &key{created: now, versions: map[int]*version{}}
		s.keys[path] = k
	}
	k.current++
	k.updated = now
	v := &version{data: body.Data, created: now}
	k.versions[k.current] = v
	for n := range k.versions {
		if n <= k.current-maxVersions {
			delete(k.versions, n)
		}
	}
	if k.current > maxVersions {
		k.oldest = k.current - maxVersions + 1
	}
	writeData(w, versionMetadata(k.current, v))
}

func (s *Server) metadata(w http.ResponseWriter, path string) {
	k := s.keys[path]
	if k == nil {
		writeErrors(w, http.StatusNotFound)
		return
	}
	versions := map[string]any{}
	for n, v := range k.versions {
		versions[strconv.Itoa(n)] = map[string]any{"created_time": v.created.Format(time.RFC3339Nano), "deletion_time": "", "destroyed": false}
	}
	writeData(w, map[string]any{
		"cas_required":         false,
		"created_time":         k.created.Format(time.RFC3339Nano),
		"current_version":      k.current,
		"custom_metadata":      nil,
		"delete_version_after": "0s",
		"max_versions":         0,
		"oldest_version":       k.oldest,
		"updated_time":         k.updated.Format(time.RFC3339Nano),
		"versions":             versions,
	})
}

// list gives the keys and folders (ending in "/") directly below path.
func (s *Server) list(w http.ResponseWriter, path string) {
	folder := strings.TrimSuffix(path, "/")
	if folder != "" {
		folder += "/"
	}
	seen := map[string]bool{}
	for p := range s.keys {
		rest, ok := strings.CutPrefix(p, folder)
		if !ok || rest == "" {
			continue
		}
		if head, _, deeper := strings.Cut(rest, "/"); deeper {
			seen[head+"/"] = true
		} else {
			seen[rest] = true
		}
	}
	if len(seen) == 0 {
		writeErrors(w, http.StatusNotFound)
		return
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	writeData(w, map[string]any{"keys": keys})
}

func versionMetadata(n int, v *version) map[string]any {
	return map[string]any{
		"created_time":    v.created.Format(time.RFC3339Nano),
		"custom_metadata": nil,
		"deletion_time":   "",
		"destroyed":       false,
		"version":         n,
	}
}

// writeData answers 200 with the API's response envelope around data.
func writeData(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"request_id":     strconv.FormatInt(time.Now().UnixNano(), 36),
		"lease_id":       "",
		"renewable":      false,
		"lease_duration": 0,
		"data":           data,
		"wrap_info":      nil,
		"warnings":       nil,
		"auth":           nil,
	})
}

func writeErrors(w http.ResponseWriter, status int, errs ...string) {
	if errs == nil {
		errs = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": errs})
}
