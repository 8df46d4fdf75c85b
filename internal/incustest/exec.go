package incustest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
)

// ExecCall is one command the server runs from its table: the exec request's command
// and environment, and the instance's files to read and remove (a pushed stdin).
type ExecCall struct {
	Args []string
	Env  map[string]string
	// Stdin is what a table command that redirects input gives the command it runs.
	Stdin []byte
	// Stop is closed when the operation is cancelled (DELETE /1.0/operations/<id>).
	Stop <-chan struct{}
	s    *Server
	in   *instance
}

// ReadFile reads and removes a file of the instance.
func (c ExecCall) ReadFile(p string) ([]byte, bool) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	m, rel := c.s.where(c.in, p)
	f, ok := m[rel]
	if !ok || f.Type != "file" {
		return nil, false
	}
	delete(m, rel)
	return f.Content, true
}

// Run runs args from the server's table, as a command the instance ran.
func (c ExecCall) Run(args []string) (stdout, stderr string, code int) {
	c.s.mu.Lock()
	fn := c.s.commands[args[0]]
	c.s.mu.Unlock()
	if fn == nil {
		return "", args[0] + ": not found\n", 127
	}
	c.Args = args
	return fn(c)
}

// Command is a command of the server's exec table: its output and exit status.
type Command func(c ExecCall) (stdout, stderr string, code int)

// SetCommand puts a command in the exec table under the first word of its command line.
func (s *Server) SetCommand(name string, fn Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands[name] = fn
}

// execHandler follows POST /1.0/instances/<name>/exec without websockets and with
// record-output: an operation whose metadata, once it ends, holds "return" and the log
// paths of "output" ("1" stdout, "2" stderr). It is called with s.mu held.
func (s *Server) execHandler(w http.ResponseWriter, r *http.Request, in *instance) {
	var req struct {
		Command     []string          `json:"command"`
		Environment map[string]string `json:"environment"`
		Cwd         string            `json:"cwd"`
		WaitWS      bool              `json:"wait-for-websocket"`
		Record      bool              `json:"record-output"`
		Interactive bool              `json:"interactive"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		errorResp(w, http.StatusBadRequest, "Failed to decode request: "+err.Error())
		return
	}
	switch {
	case !in.Running:
		errorResp(w, http.StatusBadRequest, "Instance is not running")
		return
	case req.Cwd != "" && !path.IsAbs(req.Cwd):
		errorResp(w, http.StatusBadRequest, "cwd must be an absolute path")
		return
	case len(req.Command) == 0:
		errorResp(w, http.StatusBadRequest, "No command given")
		return
	case req.WaitWS || req.Interactive || !req.Record:
		errorResp(w, http.StatusBadRequest, "incustest runs recorded, non-interactive commands only")
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	op := &operation{ID: id, Description: "Executing command", Status: "Running", StatusCode: 103,
		Metadata: map[string]any{}, cancel: make(chan struct{}), done: make(chan struct{})}
	s.ops[id] = op
	call := ExecCall{Env: req.Environment, Stop: op.cancel, s: s, in: in}
	go func() {
		stdout, stderr, code := call.Run(req.Command)
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-op.done:
			return // cancelled
		default:
		}
		logs := "/1.0/instances/" + in.Name + "/logs/exec-output/"
		out := map[string]string{}
		for fd, data := range map[string]string{"1": stdout, "2": stderr} {
			file := "exec_" + id + ".stdout"
			if fd == "2" {
				file = "exec_" + id + ".stderr"
			}
			s.execLogs[in.Name+"/"+file] = []byte(data)
			out[fd] = logs + file
		}
		op.Metadata = map[string]any{"return": code, "output": out}
		op.Status, op.StatusCode = "Success", 200
		close(op.done)
	}()
	w.Header().Set("Location", "/1.0/operations/"+id)
	writeJSON(w, http.StatusAccepted, map[string]any{"type": "async", "status": "Operation created", "status_code": 100,
		"operation": "/1.0/operations/" + id, "error_code": 0, "error": "", "metadata": op.json()})
}

// cancelOperation follows DELETE /1.0/operations/<id>: an operation that cannot be
// cancelled, or has ended, is refused. It is called with s.mu held.
func (s *Server) cancelOperation(w http.ResponseWriter, op *operation) {
	select {
	case <-op.done:
		errorResp(w, http.StatusBadRequest, "Only running operations can be cancelled")
		return
	default:
	}
	if op.cancel == nil {
		errorResp(w, http.StatusBadRequest, "This operation can't be cancelled")
		return
	}
	close(op.cancel)
	op.Status, op.StatusCode, op.Err = "Cancelled", 401, "Operation cancelled"
	close(op.done)
	syncResp(w, map[string]any{})
}

// execLogHandler serves and deletes the recorded output of an exec
// (/1.0/instances/<name>/logs/exec-output/<file>). It is called with s.mu held.
func (s *Server) execLogHandler(w http.ResponseWriter, r *http.Request, in *instance, file string) {
	key := in.Name + "/" + path.Base(file)
	data, ok := s.execLogs[key]
	if !ok || strings.Contains(file, "/") {
		errorResp(w, http.StatusNotFound, "Not found")
		return
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(data)
	case http.MethodDelete:
		delete(s.execLogs, key)
		syncResp(w, map[string]any{})
	default:
		errorResp(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}
