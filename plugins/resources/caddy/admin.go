package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/fedhost/fedhost/sdk"
)

// admin talks to Caddy's admin API (https://caddyserver.com/docs/api) on its Unix socket.
type admin struct {
	socket string
	client *http.Client
}

const adminAttempts = 5

// errNotFound is a path or @id the config does not have.
var errNotFound = errors.New("not in the Caddy config")

func newAdmin(socket string) *admin {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &admin{socket: socket, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// do sends one admin request; body is marshalled as JSON unless nil.
func (a *admin) do(ctx context.Context, method, path string, body any, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	resp, err := a.send(ctx, method, path, payload)
	if err != nil {
		return sdk.Unavailable("Caddy's admin API on %s does not answer: %v", a.socket, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusNotFound || (resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "unknown object ID")) {
		return errNotFound
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("caddy admin API %s %s: %s: %s", method, truncate(path, 120), resp.Status, adminMessage(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// send sends one request, again when the connection closed before an answer: Caddy
// replaces its admin server (on the same socket) with every config change, and a
// connection the old one accepted while stopping is closed unread. A request Caddy reads
// is answered (the old server finishes it), so sending one again is not doing it twice.
func (a *admin) send(ctx context.Context, method, path string, payload []byte) (*http.Response, error) {
	var lastErr error
	for attempt := range adminAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
		}
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://caddy-admin"+path, rd)
		if err != nil {
			return nil, err
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := a.client.Do(req)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
	}
	return nil, lastErr
}

// adminMessage is the error of an admin answer, cut short; it never holds a key, as the
// plugin sends keys only in bodies Caddy does not echo.
func adminMessage(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return truncate(e.Error, 300)
	}
	return truncate(strings.TrimSpace(string(b)), 300)
}

// load replaces the whole config: only when Caddy starts, before it serves anything.
func (a *admin) load(ctx context.Context, cfg object) error {
	return a.do(ctx, http.MethodPost, "/load", cfg, nil)
}

// exists reports whether the object with @id id is in the running config.
func (a *admin) exists(ctx context.Context, id string) (bool, error) {
	var v json.RawMessage
	err := a.do(ctx, http.MethodGet, "/id/"+id, nil, &v)
	if errors.Is(err, errNotFound) {
		return false, nil
	}
	return err == nil && string(v) != "null", err
}

// put sets the object with @id id: it replaces it when it is there (PATCH /id/...), else
// adds it with add.
func (a *admin) put(ctx context.Context, id string, obj object, add func() error) error {
	ok, err := a.exists(ctx, id)
	if err != nil {
		return err
	}
	if ok {
		return a.do(ctx, http.MethodPatch, "/id/"+id, obj, nil)
	}
	return add()
}

// remove deletes the object with @id id; one that is not there is no error.
func (a *admin) remove(ctx context.Context, id string) error {
	err := a.do(ctx, http.MethodDelete, "/id/"+id, nil, nil)
	if errors.Is(err, errNotFound) {
		return nil
	}
	return err
}
