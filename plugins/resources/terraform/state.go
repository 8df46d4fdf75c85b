package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

// token is the workspace's password at the host's state backend: hex HMAC-SHA256 of
// "tenant/instance" under state_key, as the host checks it (host/tfstate).
func token(stateKey, tenant, instance string) string {
	mac := hmac.New(sha256.New, []byte(stateKey))
	mac.Write([]byte(tenant + "/" + instance))
	return hex.EncodeToString(mac.Sum(nil))
}

// lockInfo is Terraform's lock info (statemgr.LockInfo), as the backend keeps it.
type lockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Info      string    `json:"Info"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
}

// backend talks to the host's state backend for one workspace.
type backend struct {
	url, user, password string
	client              *http.Client
}

func (c *config) backendFor(tenant, instance string) backend {
	return backend{
		url:      strings.TrimSuffix(c.stateAddress.String(), "/") + "/" + tenant + "/" + instance,
		user:     "fedhost",
		password: token(c.stateKey, tenant, instance),
		client:   &http.Client{Timeout: 30 * time.Second},
	}
}

func (b backend) do(ctx context.Context, method, query string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.url+query, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(b.user, b.password)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, sdk.Unavailable("the host's terraform state backend does not answer: %v", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	return resp.StatusCode, out, err
}

// clearStaleLock makes sure no run's lock stands in the way: it takes the lock and
// gives it back at once. A lock held longer than staleAfter is a crashed run's: it is
// released (and logged). A younger one fails with what to do.
func (b backend) clearStaleLock(ctx context.Context, staleAfter time.Duration, now time.Time, workspace string) error {
	probe := lockInfo{ID: rand.Text(), Operation: "fedhost-probe", Who: "fedhost-resource-terraform", Created: now.UTC()}
	body, _ := json.Marshal(probe)
	status, answer, err := b.do(ctx, "LOCK", "", body)
	if err != nil {
		return err
	}
	switch status {
	case http.StatusOK:
		return b.unlock(ctx, probe.ID)
	case http.StatusLocked, http.StatusConflict:
	default:
		return backendRefused(status)
	}
	var held lockInfo
	if json.Unmarshal(answer, &held) != nil || held.ID == "" {
		return sdk.Conflict("the terraform state of %s is locked by a lock whose info the backend does not give: release it with terraform force-unlock", workspace)
	}
	age := now.Sub(held.Created)
	if held.Created.IsZero() || age < staleAfter {
		return sdk.Conflict("the terraform state of %s is locked (lock %s, %s, since %s): another run may still be going on. "+
			"This provider releases a lock older than stale_lock_after (%s); to release it sooner, make sure no run is going on and run terraform force-unlock %s on the workspace",
			workspace, bounded(held.ID, 64), bounded(held.Operation, 64), held.Created.UTC().Format(time.RFC3339), staleAfter, bounded(held.ID, 64))
	}
	hclog.Default().Warn("releasing a stale terraform state lock: its run is taken for crashed", "workspace", workspace,
		"lock", bounded(held.ID, 64), "operation", bounded(held.Operation, 64), "who", bounded(held.Who, 128), "created", held.Created.UTC().Format(time.RFC3339), "age", age.Round(time.Second).String())
	if err := b.unlock(ctx, held.ID); err != nil {
		return err
	}
	return nil
}

func (b backend) unlock(ctx context.Context, id string) error {
	body, _ := json.Marshal(lockInfo{ID: id})
	status, _, err := b.do(ctx, "UNLOCK", "", body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return backendRefused(status)
	}
	return nil
}

// forget deletes the workspace's state at the host.
func (b backend) forget(ctx context.Context) error {
	status, _, err := b.do(ctx, http.MethodDelete, "", nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return backendRefused(status)
	}
	return nil
}

func backendRefused(status int) error {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return sdk.Invalid("settings/state_key", "the host's state backend refused this workspace's token (%d): let the host fill in state_key, or give the one it uses", status)
	case http.StatusNotFound:
		return sdk.Invalid("settings/state_address", "the host does not serve terraform states at state_address: let the host fill it in")
	}
	return sdk.Unavailable("the host's terraform state backend answered %d: try again; if it keeps failing, look at the host's log", status)
}

// bounded cuts a string that came from outside to max bytes for a message or a log.
func bounded(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
