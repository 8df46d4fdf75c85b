package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The Incus REST API (doc/rest-api.md of lxc/incus, API version 1.0) answers every call
// with one of three envelopes: "sync" (HTTP 200, the answer in metadata), "async"
// (HTTP 202, the URL of a background operation in operation) or "error".
type response struct {
	Type       string          `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`
}

// operation is a background operation (doc/rest-api.md, "Background operation").
type operation struct {
	ID         string `json:"id"`
	Class      string `json:"class"`
	Status     string `json:"status"`
	StatusCode int    `json:"status_code"`
	Err        string `json:"err"`
	// Metadata is the operation's own: an exec's return status and recorded output.
	Metadata json.RawMessage `json:"metadata"`
}

// Operation status codes of the Incus API.
const (
	opSuccess   = 200
	opFailure   = 400
	opCancelled = 401
)

// apiError is an error the server answered, with its HTTP-like code.
type apiError struct {
	Code    int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

func isNotFound(err error) bool {
	var a *apiError
	return errors.As(err, &a) && a.Code == http.StatusNotFound
}

func isConflict(err error) bool {
	var a *apiError
	return errors.As(err, &a) && a.Code == http.StatusConflict
}

// maxResponse bounds what the driver reads of one answer; maxMessage what it keeps of a
// message from the server.
const (
	maxResponse = 8 << 20
	maxMessage  = 512
)

var operationID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// parseResponse reads one answer of the API: an error envelope (or an HTTP error
// without one) becomes an *apiError; an async one must name an operation of
// /1.0/operations/.
func parseResponse(status int, body []byte) (*response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		if status >= 400 {
			return nil, &apiError{Code: status, Message: "HTTP " + strconv.Itoa(status) + " without an Incus error"}
		}
		return nil, fmt.Errorf("the answer is not an Incus API envelope (HTTP %d)", status)
	}
	switch r.Type {
	case "error":
		code := r.ErrorCode
		if code == 0 {
			code = status
		}
		msg := bounded(r.Error)
		if msg == "" {
			msg = "error without a message"
		}
		return nil, &apiError{Code: code, Message: msg}
	case "sync":
		if status >= 400 {
			return nil, &apiError{Code: status, Message: "HTTP " + strconv.Itoa(status) + " with a sync envelope"}
		}
		return &r, nil
	case "async":
		id, ok := strings.CutPrefix(r.Operation, "/1.0/operations/")
		if !ok || !operationID.MatchString(id) {
			return nil, errors.New("an async answer does not name an operation of /1.0/operations/")
		}
		r.Operation = id
		return &r, nil
	}
	if status >= 400 {
		return nil, &apiError{Code: status, Message: "HTTP " + strconv.Itoa(status) + " without an Incus error"}
	}
	return nil, fmt.Errorf("the answer's envelope type %q is none of sync, async, error", bounded(r.Type))
}

// bounded keeps at most maxMessage bytes of a message from the server, on one line.
func bounded(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		s = s[:maxMessage] + "…"
	}
	return s
}

// apiClient calls the API of one Incus server in one project.
type apiClient struct {
	base    string // https://host:port
	http    *http.Client
	project string
	// opTimeout bounds one background operation (an image pull can take minutes).
	opTimeout time.Duration
}

// call sends a request and parses its answer; body is JSON-encoded unless it is an
// io.Reader (the files API takes the raw content).
func (c *apiClient) call(ctx context.Context, method, p string, query url.Values, body any, hdr http.Header) (*response, error) {
	if query == nil {
		query = url.Values{}
	}
	if p != "/1.0" && c.project != "" {
		query.Set("project", c.project)
	}
	u := c.base + p
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd, ctype = b, "application/octet-stream"
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd, ctype = bytes.NewReader(buf), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, err
	}
	return parseResponse(resp.StatusCode, raw)
}

// get decodes the metadata of a sync answer into out.
func (c *apiClient) get(ctx context.Context, p string, query url.Values, out any) error {
	r, err := c.call(ctx, http.MethodGet, p, query, nil, nil)
	if err != nil {
		return err
	}
	if r.Type != "sync" {
		return fmt.Errorf("GET %s answered %s, not sync", p, r.Type)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.Metadata, out); err != nil {
		return fmt.Errorf("GET %s: unexpected metadata: %v", p, err)
	}
	return nil
}

// do sends a request and, when the server starts a background operation, waits for it.
func (c *apiClient) do(ctx context.Context, method, p string, body any, hdr http.Header) error {
	r, err := c.call(ctx, method, p, nil, body, hdr)
	if err != nil {
		return err
	}
	if r.Type == "async" {
		return c.wait(ctx, r.Operation)
	}
	return nil
}

// wait polls GET /1.0/operations/{id}/wait until the operation ends, fails or the
// driver's operation timeout passes.
func (c *apiClient) wait(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opTimeout)
	defer cancel()
	for {
		var op operation
		err := c.get(ctx, "/1.0/operations/"+id+"/wait", url.Values{"timeout": {"30"}}, &op)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("operation %s did not end within %s", id, c.opTimeout)
			}
			return err
		}
		switch op.StatusCode {
		case opSuccess:
			return nil
		case opFailure, opCancelled:
			msg := bounded(op.Err)
			if msg == "" {
				msg = bounded(op.Status)
			}
			return &apiError{Code: op.StatusCode, Message: msg}
		}
	}
}

// instancePath is the API path of an instance (its name is checked: see instanceName).
func instancePath(name string, rest ...string) string {
	return path.Join(append([]string{"/1.0/instances", name}, rest...)...)
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
