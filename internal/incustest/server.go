// Package incustest is an HTTPS server that follows the Incus REST API document
// (doc/rest-api.md of lxc/incus, API version 1.0, and the instances, operations, files,
// console and storage volume endpoints of doc/rest-api.yaml) closely enough to test a
// driver that talks to it: TLS with a client certificate required and an unknown one
// refused 403, the sync, async and error envelopes, background operations that end a
// little later and can fail, instances with a state, their files, proxy devices and
// custom volumes, Incus's 404 and 409 errors, and the websocket form of exec (exec.go).
//
// It runs no containers. An instance that is started listens on its proxy devices'
// listen addresses itself and answers there as the stand-in of the node's process
// (see standIn), reading the files the driver wrote into it. An exec runs its command
// for real, on this machine, in a directory of the instance (see execHandler).
package incustest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Image is an image the server can pull: its source as POST /1.0/instances names it,
// and for an OCI image the user its process runs as and its command (shell-quoted).
type Image struct {
	Protocol, Server, Alias string
	UID, GID                int
	Entrypoint              string
}

// Server is a running test server.
type Server struct {
	// URL is https://127.0.0.1:port.
	URL string
	// CertFile is the server's certificate (PEM), to pin; Fingerprint its SHA-256.
	CertFile, Fingerprint string
	// ClientCertFile and ClientKeyFile are a client certificate the server trusts.
	ClientCertFile, ClientKeyFile string
	ln                            net.Listener
	hs                            *http.Server
	trusted                       map[string]bool

	mu         sync.Mutex
	opDelay    time.Duration // how long a background operation runs before it ends
	images     []Image
	instances  map[string]*instance // by name (project default only, and the test project)
	volumes    map[string]*volume   // by pool/name
	ops        map[string]*operation
	failNext   map[string]string // operation description -> error of its next run
	extensions []string          // the api_extensions GET /1.0 names
	requests   []string          // method and path of each request, for tests
	dir        string            // the server's directory: certificates, instances/<name>
}

type file struct {
	Type     string // file, directory, symlink
	Mode     int
	UID, GID int
	Content  []byte
}

type instance struct {
	Name     string
	Project  string
	Config   map[string]string
	Expanded map[string]string
	Devices  map[string]map[string]string
	Profiles []string
	Running  bool
	Boots    int
	Files    map[string]*file
	Console  []string
	servers  []*http.Server // the stand-in on each proxy device
	execs    []*os.Process  // the processes of its running execs
}

type volume struct {
	Pool, Name string
	Config     map[string]string
	Files      map[string]*file
}

type operation struct {
	ID          string
	Description string
	Status      string
	StatusCode  int
	Err         string
	Metadata    any
	Class       string                                       // task, or websocket (an exec)
	onCancel    func()                                       // what DELETE does, for an operation that may be cancelled
	connect     func(w http.ResponseWriter, r *http.Request) // its websockets, for class websocket
	done        chan struct{}
}

// Projects, profiles and pools the server has.
var (
	projects = map[string]bool{"default": true, "fedhost": true}
	profiles = map[string]bool{"default": true}
	pools    = map[string]bool{"default": true}
	networks = map[string]bool{"incusbr0": true}
)

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,62}$`)

// Start starts the server on 127.0.0.1 with its certificates in dir, knowing images.
func Start(dir string, images ...Image) (*Server, error) {
	certFile, keyFile, fp, err := WriteCert(dir, "server")
	if err != nil {
		return nil, err
	}
	clientCert, clientKey, clientFP, err := WriteCert(dir, "client")
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "https://" + ln.Addr().String(), CertFile: certFile, Fingerprint: fp,
		ClientCertFile: clientCert, ClientKeyFile: clientKey, opDelay: 20 * time.Millisecond,
		ln: ln, trusted: map[string]bool{clientFP: true}, images: images,
		instances: map[string]*instance{}, volumes: map[string]*volume{}, ops: map[string]*operation{}, failNext: map[string]string{}, dir: dir,
		extensions: defaultExtensions,
	}
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	// Incus asks every client for a certificate; this server requires one, and refuses
	// an untrusted one per request (403), as Incus does for all but GET /1.0.
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12})
	go s.hs.Serve(tl)
	return s, nil
}

// Close stops the server and every stand-in listener.
func (s *Server) Close() {
	s.hs.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		in.stop()
	}
}

// SetOperationDelay sets how long each background operation runs before it ends (20 ms
// from Start).
func (s *Server) SetOperationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opDelay = d
}

// defaultExtensions are the API extensions the server names: those of what it does.
var defaultExtensions = []string{"instances", "instance_oci", "instance_oci_entrypoint", "custom_volume_size", "console_vga_type"}

// SetExtensions replaces the api_extensions GET /1.0 names (an older server's).
func (s *Server) SetExtensions(ext ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extensions = ext
}

// FailNext makes the next operation whose description starts with prefix ("Starting
// instance", "Creating instance") fail with msg.
func (s *Server) FailNext(prefix, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[prefix] = msg
}

// Instance reports whether the instance exists and runs, and its config.
func (s *Server) Instance(name string) (exists, running bool, config map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[name]
	if !ok {
		return false, false, nil
	}
	c := map[string]string{}
	for k, v := range in.Config {
		c[k] = v
	}
	return true, in.Running, c
}

// File returns a file of the instance as the process in it would see it (through its
// volumes), with its mode, uid and gid.
func (s *Server) File(name, p string) (content []byte, mode, uid, gid int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, found := s.instances[name]
	if !found {
		return nil, 0, 0, 0, false
	}
	f := s.lookup(in, p)
	if f == nil {
		return nil, 0, 0, 0, false
	}
	return append([]byte(nil), f.Content...), f.Mode, f.UID, f.GID, true
}

// VolumeFile returns a file of a custom volume by its path in the volume.
func (s *Server) VolumeFile(pool, name, p string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumes[pool+"/"+name]
	if !ok {
		return nil, false
	}
	f, ok := v.Files[path.Clean("/"+p)]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), f.Content...), true
}

// Volume reports whether a custom volume exists.
func (s *Server) Volume(pool, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.volumes[pool+"/"+name]
	return ok
}

// Requests returns "METHOD path" of every request so far.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// where finds the file map and the path in it that p of the instance is: a volume
// mounted at or above p, or the instance's own root file system.
func (s *Server) where(in *instance, p string) (map[string]*file, string) {
	p = path.Clean("/" + p)
	best, bestPath := "", ""
	for _, d := range in.Devices {
		if d["type"] != "disk" || d["source"] == "" || d["path"] == "" {
			continue
		}
		mp := path.Clean(d["path"])
		if (p == mp || strings.HasPrefix(p, mp+"/")) && len(mp) > len(bestPath) {
			best, bestPath = d["pool"]+"/"+d["source"], mp
		}
	}
	if v, ok := s.volumes[best]; ok {
		return v.Files, path.Clean("/" + strings.TrimPrefix(p, bestPath))
	}
	return in.Files, p
}

func (s *Server) lookup(in *instance, p string) *file {
	m, rel := s.where(in, p)
	return m[rel]
}

func (in *instance) stop() {
	for _, hs := range in.servers {
		hs.Close() // its listener and the connections it has, as a stopped forkproxy
	}
	in.servers = nil
	for _, p := range in.execs {
		p.Kill() // as the container's processes end when it stops
	}
	in.Running = false
}

// envelopes of doc/rest-api.md.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func syncResp(w http.ResponseWriter, metadata any) {
	writeJSON(w, http.StatusOK, map[string]any{"type": "sync", "status": "Success", "status_code": 200, "operation": "", "error_code": 0, "error": "", "metadata": metadata})
}

func errorResp(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"type": "error", "status": "", "status_code": 0, "operation": "", "error_code": code, "error": msg, "metadata": nil})
}

func (op *operation) json() map[string]any {
	class := op.Class
	if class == "" {
		class = "task"
	}
	return map[string]any{"id": op.ID, "class": class, "description": op.Description, "status": op.Status, "status_code": op.StatusCode,
		"err": op.Err, "may_cancel": op.onCancel != nil, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "metadata": op.Metadata, "resources": map[string]any{}}
}

// async starts a background operation that runs fn after the server's delay; its error
// fails the operation. It is called with s.mu held; fn runs with s.mu held.
func (s *Server) async(w http.ResponseWriter, description string, fn func() error) {
	b := make([]byte, 16)
	rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	op := &operation{ID: id, Description: description, Status: "Running", StatusCode: 103, done: make(chan struct{})}
	s.ops[id] = op
	fail := ""
	for prefix, msg := range s.failNext {
		if strings.HasPrefix(description, prefix) {
			fail = msg
			delete(s.failNext, prefix)
		}
	}
	delay := s.opDelay
	go func() {
		time.Sleep(delay)
		s.mu.Lock()
		defer s.mu.Unlock()
		err := error(nil)
		if fail != "" {
			err = fmt.Errorf("%s", fail)
		} else {
			err = fn()
		}
		if err != nil {
			op.Status, op.StatusCode, op.Err = "Failure", 400, err.Error()
		} else {
			op.Status, op.StatusCode = "Success", 200
		}
		close(op.done)
	}()
	w.Header().Set("Location", "/1.0/operations/"+id)
	writeJSON(w, http.StatusAccepted, map[string]any{"type": "async", "status": "Operation created", "status_code": 100,
		"operation": "/1.0/operations/" + id, "error_code": 0, "error": "", "metadata": op.json()})
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	trusted := false
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		trusted = s.trusted[hex.EncodeToString(sum[:])]
	}
	if r.URL.Path == "/1.0" && r.Method == http.MethodGet {
		auth := "untrusted"
		if trusted {
			auth = "trusted"
		}
		s.mu.Lock()
		ext := s.extensions
		s.mu.Unlock()
		syncResp(w, map[string]any{"api_extensions": ext,
			"api_status": "stable", "api_version": "1.0", "auth": auth, "public": false, "auth_methods": []string{"tls"},
			"environment": map[string]any{"server_name": "incustest", "server_version": "6.0-incustest", "server": "incus", "project": "default"}})
		return
	}
	if !trusted {
		errorResp(w, http.StatusForbidden, "not authorized")
		return
	}
	if p := r.URL.Query().Get("project"); p != "" && !projects[p] {
		errorResp(w, http.StatusNotFound, "Project not found")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) == 4 && parts[1] == "operations" && parts[3] == "websocket" && r.Method == http.MethodGet {
		// GET /1.0/operations/<id>/websocket: a websocket of the operation, served
		// without the server's lock (incusd's operationWebsocketGet).
		s.mu.Lock()
		op, ok := s.ops[parts[2]]
		s.mu.Unlock()
		if !ok {
			errorResp(w, http.StatusNotFound, "Operation not found")
			return
		}
		s.connectOperation(w, r, op)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(parts) == 2 && parts[1] == "instances":
		s.instancesHandler(w, r)
	case len(parts) >= 3 && parts[1] == "instances":
		in, ok := s.instances[parts[2]]
		if !ok {
			errorResp(w, http.StatusNotFound, "Instance not found")
			return
		}
		sub := ""
		if len(parts) == 4 {
			sub = parts[3]
		} else if len(parts) > 4 {
			errorResp(w, http.StatusNotFound, "not found")
			return
		}
		s.instanceHandler(w, r, in, sub)
	case len(parts) >= 3 && parts[1] == "operations":
		op, ok := s.ops[parts[2]]
		if !ok {
			errorResp(w, http.StatusNotFound, "Operation not found")
			return
		}
		if len(parts) == 3 && r.Method == http.MethodDelete {
			s.cancelOperation(w, op)
			return
		}
		if len(parts) == 4 && parts[3] == "wait" {
			timeout, _ := strconv.Atoi(r.URL.Query().Get("timeout"))
			if timeout <= 0 || timeout > 60 {
				timeout = 60
			}
			s.mu.Unlock()
			select {
			case <-op.done:
			case <-time.After(time.Duration(timeout) * time.Second):
			case <-r.Context().Done():
			}
			s.mu.Lock()
		}
		syncResp(w, op.json())
	case len(parts) >= 4 && parts[1] == "storage-pools" && parts[3] == "volumes":
		s.volumesHandler(w, r, parts[2], parts[4:])
	default:
		errorResp(w, http.StatusNotFound, "not found")
	}
}

func (in *instance) json() map[string]any {
	status, code := "Stopped", 102
	if in.Running {
		status, code = "Running", 103
	}
	return map[string]any{"name": in.Name, "project": in.Project, "type": "container", "status": status, "status_code": code,
		"config": in.Config, "expanded_config": in.Expanded, "devices": in.Devices, "expanded_devices": in.Devices,
		"profiles": in.Profiles, "ephemeral": false, "stateful": false, "architecture": "x86_64", "location": "none"}
}

func (s *Server) instancesHandler(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		names := make([]string, 0, len(s.instances))
		for n := range s.instances {
			names = append(names, n)
		}
		sort.Strings(names)
		if r.URL.Query().Get("recursion") == "1" {
			out := []any{}
			for _, n := range names {
				out = append(out, s.instances[n].json())
			}
			syncResp(w, out)
			return
		}
		out := []string{}
		for _, n := range names {
			out = append(out, "/1.0/instances/"+n)
		}
		syncResp(w, out)
	case http.MethodPost:
		var req struct {
			Name     string                       `json:"name"`
			Type     string                       `json:"type"`
			Config   map[string]string            `json:"config"`
			Devices  map[string]map[string]string `json:"devices"`
			Profiles []string                     `json:"profiles"`
			Start    bool                         `json:"start"`
			Source   struct {
				Type, Mode, Server, Protocol, Alias string
			} `json:"source"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			errorResp(w, http.StatusBadRequest, "Failed to decode request: "+err.Error())
			return
		}
		if !validName.MatchString(req.Name) || strings.HasSuffix(req.Name, "-") {
			errorResp(w, http.StatusBadRequest, "Invalid instance name: Name must only contain alphanumeric and hyphen characters")
			return
		}
		if req.Type != "" && req.Type != "container" {
			errorResp(w, http.StatusBadRequest, "Invalid instance type")
			return
		}
		if _, ok := s.instances[req.Name]; ok {
			errorResp(w, http.StatusConflict, "Instance \""+req.Name+"\" already exists")
			return
		}
		for _, p := range req.Profiles {
			if !profiles[p] {
				errorResp(w, http.StatusBadRequest, "Requested profile \""+p+"\" doesn't exist")
				return
			}
		}
		for name, d := range req.Devices {
			if err := s.checkDevice(name, d); err != nil {
				errorResp(w, http.StatusBadRequest, "Invalid devices: "+err.Error())
				return
			}
		}
		project := r.URL.Query().Get("project")
		if project == "" {
			project = "default"
		}
		s.async(w, "Creating instance", func() error {
			if req.Source.Type != "image" {
				return fmt.Errorf("Unknown source type %q", req.Source.Type)
			}
			var img *Image
			for i := range s.images {
				c := &s.images[i]
				if c.Protocol == req.Source.Protocol && c.Server == req.Source.Server && c.Alias == req.Source.Alias {
					img = c
				}
			}
			if img == nil {
				return fmt.Errorf("Failed getting remote image info: Image not found")
			}
			for _, d := range req.Devices {
				if d["type"] == "disk" && d["source"] != "" {
					if _, ok := s.volumes[d["pool"]+"/"+d["source"]]; !ok {
						return fmt.Errorf("Failed creating instance record: Storage volume %q in pool %q not found", d["source"], d["pool"])
					}
				}
			}
			if _, ok := s.instances[req.Name]; ok {
				return fmt.Errorf("Instance %q already exists", req.Name)
			}
			in := &instance{Name: req.Name, Project: project, Config: req.Config, Devices: req.Devices, Profiles: req.Profiles,
				Expanded: map[string]string{}, Files: map[string]*file{}}
			if in.Config == nil {
				in.Config = map[string]string{}
			}
			if img.Protocol == "oci" {
				// As incusd's instanceCreateFromImage: the OCI config's user and command
				// become config keys unless the request set them.
				in.Config["volatile.container.oci"] = "true"
				for k, v := range map[string]string{"oci.uid": strconv.Itoa(img.UID), "oci.gid": strconv.Itoa(img.GID), "oci.entrypoint": img.Entrypoint} {
					if _, ok := in.Config[k]; !ok && v != "" {
						in.Config[k] = v
					}
				}
			}
			for k, v := range in.Config {
				in.Expanded[k] = v
			}
			for _, d := range []string{"/", "/etc", "/etc/systemd", "/etc/systemd/system", "/etc/systemd/system/multi-user.target.wants", "/srv", "/tmp", "/var", "/var/lib"} {
				in.Files[d] = &file{Type: "directory", Mode: 0o755}
			}
			s.instances[req.Name] = in
			return nil
		})
	default:
		errorResp(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func (s *Server) checkDevice(name string, d map[string]string) error {
	switch d["type"] {
	case "disk":
		if !pools[d["pool"]] {
			return fmt.Errorf("Device %q: storage pool %q doesn't exist", name, d["pool"])
		}
		if !path.IsAbs(d["path"]) {
			return fmt.Errorf("Device %q: disk path must be absolute", name)
		}
	case "nic":
		if !networks[d["network"]] {
			return fmt.Errorf("Device %q: network %q doesn't exist", name, d["network"])
		}
	case "proxy":
		for _, k := range []string{"listen", "connect"} {
			a, ok := strings.CutPrefix(d[k], "tcp:")
			if _, _, err := net.SplitHostPort(a); !ok || err != nil {
				return fmt.Errorf("Device %q: invalid %s address %q", name, k, d[k])
			}
		}
	default:
		return fmt.Errorf("Device %q: unknown device type %q", name, d["type"])
	}
	return nil
}

func (s *Server) instanceHandler(w http.ResponseWriter, r *http.Request, in *instance, sub string) {
	switch {
	case sub == "" && r.Method == http.MethodGet:
		syncResp(w, in.json())
	case sub == "" && r.Method == http.MethodDelete:
		if in.Running {
			errorResp(w, http.StatusBadRequest, "Instance is running")
			return
		}
		s.async(w, "Deleting instance", func() error {
			delete(s.instances, in.Name)
			return os.RemoveAll(s.instanceDir(in.Name))
		})
	case sub == "state" && r.Method == http.MethodGet:
		j := in.json()
		syncResp(w, map[string]any{"status": j["status"], "status_code": j["status_code"], "pid": 0, "processes": 0})
	case sub == "state" && r.Method == http.MethodPut:
		var req struct {
			Action string `json:"action"`
			Force  bool   `json:"force"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			errorResp(w, http.StatusBadRequest, "Failed to decode request: "+err.Error())
			return
		}
		switch req.Action {
		case "start":
			if in.Running {
				errorResp(w, http.StatusBadRequest, "The instance is already running")
				return
			}
			s.async(w, "Starting instance", func() error { return s.start(in) })
		case "stop":
			if !in.Running {
				errorResp(w, http.StatusBadRequest, "The instance is already stopped")
				return
			}
			s.async(w, "Stopping instance", func() error {
				in.stop()
				in.Console = append(in.Console, "incustest: stopped")
				return nil
			})
		default:
			errorResp(w, http.StatusBadRequest, "Unknown action "+strconv.Quote(req.Action))
		}
	case sub == "files":
		s.filesHandler(w, r, in)
	case sub == "exec" && r.Method == http.MethodPost:
		s.execHandler(w, r, in)
	case sub == "console" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, strings.Join(in.Console, "\n")+"\n")
	default:
		errorResp(w, http.StatusNotFound, "not found")
	}
}

func (s *Server) filesHandler(w http.ResponseWriter, r *http.Request, in *instance) {
	p := r.URL.Query().Get("path")
	if !path.IsAbs(p) {
		errorResp(w, http.StatusBadRequest, "Path must be absolute")
		return
	}
	p = path.Clean(p)
	switch r.Method {
	case http.MethodGet:
		f := s.lookup(in, p)
		if f == nil {
			errorResp(w, http.StatusNotFound, "Not found")
			return
		}
		w.Header().Set("X-Incus-uid", strconv.Itoa(f.UID))
		w.Header().Set("X-Incus-gid", strconv.Itoa(f.GID))
		w.Header().Set("X-Incus-mode", fmt.Sprintf("%04o", f.Mode))
		w.Header().Set("X-Incus-type", f.Type)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(f.Content)
	case http.MethodPost:
		// As incusd's instanceFilePost: mode is parsed with base 0 ("0600" is octal),
		// an existing file keeps its mode and owner, an existing directory is left as it
		// is, and the write mode is overwrite (the default) or append.
		h := r.Header
		typ := orDefault(h.Get("X-Incus-type"), "file")
		write := orDefault(h.Get("X-Incus-write"), "overwrite")
		if write != "overwrite" && write != "append" {
			errorResp(w, http.StatusBadRequest, "Bad file write mode: "+write)
			return
		}
		mode := -1
		if m, err := strconv.ParseInt(h.Get("X-Incus-mode"), 0, 0); err == nil {
			mode = int(m) & 0o777
		}
		uid, err1 := strconv.Atoi(orDefault(h.Get("X-Incus-uid"), "0"))
		gid, err2 := strconv.Atoi(orDefault(h.Get("X-Incus-gid"), "0"))
		if err1 != nil || err2 != nil {
			errorResp(w, http.StatusBadRequest, "Invalid uid or gid")
			return
		}
		if parent := s.lookup(in, path.Dir(p)); p != "/" && (parent == nil || parent.Type != "directory") {
			errorResp(w, http.StatusNotFound, "Parent directory "+strconv.Quote(path.Dir(p))+" not found")
			return
		}
		content, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			errorResp(w, http.StatusBadRequest, err.Error())
			return
		}
		m, rel := s.where(in, p)
		old := m[rel]
		switch typ {
		case "directory":
			if old == nil {
				if mode < 0 {
					mode = 0o755
				}
				m[rel] = &file{Type: "directory", Mode: mode, UID: uid, GID: gid}
			}
		case "file":
			switch {
			case old == nil:
				if mode < 0 {
					mode = 0o644
				}
				m[rel] = &file{Type: "file", Mode: mode, UID: uid, GID: gid, Content: content}
			case old.Type != "file":
				errorResp(w, http.StatusBadRequest, "Path is not a regular file")
				return
			case write == "append":
				old.Content = append(old.Content, content...)
			default:
				old.Content = content
			}
		case "symlink":
			if old == nil || old.Type != "symlink" || string(old.Content) != string(content) {
				if old != nil {
					errorResp(w, http.StatusConflict, "File exists")
					return
				}
				m[rel] = &file{Type: "symlink", Mode: 0o777, Content: content}
			}
		default:
			errorResp(w, http.StatusBadRequest, "Bad file type "+strconv.Quote(typ))
			return
		}
		syncResp(w, map[string]any{})
	case http.MethodDelete:
		m, rel := s.where(in, p)
		if _, ok := m[rel]; !ok {
			errorResp(w, http.StatusNotFound, "Not found")
			return
		}
		delete(m, rel)
		syncResp(w, map[string]any{})
	default:
		errorResp(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (s *Server) volumesHandler(w http.ResponseWriter, r *http.Request, pool string, rest []string) {
	if !pools[pool] {
		errorResp(w, http.StatusNotFound, "Storage pool not found")
		return
	}
	if len(rest) == 0 || rest[0] != "custom" || len(rest) > 2 {
		errorResp(w, http.StatusNotFound, "not found")
		return
	}
	if len(rest) == 1 {
		if r.Method != http.MethodPost {
			errorResp(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		var req struct {
			Name   string            `json:"name"`
			Config map[string]string `json:"config"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || req.Name == "" || strings.ContainsAny(req.Name, "/ ") {
			errorResp(w, http.StatusBadRequest, "Invalid storage volume name")
			return
		}
		key := pool + "/" + req.Name
		if _, ok := s.volumes[key]; ok {
			errorResp(w, http.StatusConflict, "Volume by that name already exists")
			return
		}
		s.async(w, "Creating storage volume", func() error {
			s.volumes[key] = &volume{Pool: pool, Name: req.Name, Config: req.Config, Files: map[string]*file{"/": {Type: "directory", Mode: 0o711}}}
			return nil
		})
		return
	}
	key := pool + "/" + rest[1]
	v, ok := s.volumes[key]
	if !ok {
		errorResp(w, http.StatusNotFound, "Storage volume not found")
		return
	}
	switch r.Method {
	case http.MethodGet:
		syncResp(w, map[string]any{"name": v.Name, "type": "custom", "config": v.Config, "content_type": "filesystem"})
	case http.MethodDelete:
		for _, in := range s.instances {
			for _, d := range in.Devices {
				if d["type"] == "disk" && d["pool"] == pool && d["source"] == v.Name {
					errorResp(w, http.StatusBadRequest, "The storage volume is still in use")
					return
				}
			}
		}
		delete(s.volumes, key)
		syncResp(w, nil)
	default:
		errorResp(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// start starts the instance: it binds each proxy device's listen address, as Incus's
// forkproxy does, and answers there as the stand-in of its process.
func (s *Server) start(in *instance) error {
	var ls []net.Listener
	names := make([]string, 0, len(in.Devices))
	for n := range in.Devices {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := in.Devices[n]
		if d["type"] != "proxy" {
			continue
		}
		l, err := net.Listen("tcp", strings.TrimPrefix(d["listen"], "tcp:"))
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return fmt.Errorf("Failed to start device %q: Error occurred when starting proxy device: %v", n, err)
		}
		ls = append(ls, l)
	}
	in.Running = true
	in.Boots++
	in.Console = append(in.Console, fmt.Sprintf("incustest: started (boot %d) entrypoint %q", in.Boots, in.Expanded["oci.entrypoint"]))
	if in.Config["environment.FAIL_START"] != "" {
		token := ""
		if f := s.lookup(in, in.Config["environment.TOKEN_FILE"]); f != nil {
			token = strings.TrimSpace(string(f.Content))
		}
		in.Console = append(in.Console, "refusing to start with token "+token)
	}
	for _, l := range ls {
		hs := &http.Server{Handler: s.standIn(in, in.Boots), ReadHeaderTimeout: 5 * time.Second}
		in.servers = append(in.servers, hs)
		go hs.Serve(l)
	}
	return nil
}

// standIn answers for the node's process, the way the drivers' test node
// (plugins/resources/local/testdata/httpserver) does: GET /healthz, GET /boot (the
// instance's start count), and GET and PUT /data, which need "Authorization: Bearer"
// with the content of the file at the instance's environment.TOKEN_FILE and keep the
// data in the file "data" of the directory environment.DATA_DIR, through its volumes.
func (s *Server) standIn(in *instance, boot int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		failing := in.Config["environment.FAIL_START"] != ""
		s.mu.Unlock()
		if failing {
			http.Error(w, "not started", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /boot", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strconv.Itoa(boot)) })
	mux.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		tok := s.lookup(in, in.Config["environment.TOKEN_FILE"])
		if tok == nil || r.Header.Get("Authorization") != "Bearer "+strings.TrimSpace(string(tok.Content)) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		dir := in.Config["environment.DATA_DIR"]
		m, rel := s.where(in, path.Join("/", dir, "data"))
		switch r.Method {
		case http.MethodGet:
			f, ok := m[rel]
			if !ok {
				http.Error(w, "no data", http.StatusNotFound)
				return
			}
			w.Write(f.Content)
		case http.MethodPut:
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			m[rel] = &file{Type: "file", Mode: 0o600, Content: b}
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
	return mux
}
