package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	bao "github.com/openbao/openbao/api/v2"

	"github.com/fedhost/fedhost/sdk"
)

// The fields of a KV entry the provider writes: the value (as text, or base64 when it is
// not UTF-8), how it was made, and the ownership marker.
const (
	fieldValue       = "value"
	fieldValueBase64 = "value_base64"
	fieldGenerator   = "generator"
	fieldTenant      = "fedhost_tenant"
	fieldInstance    = "fedhost_instance"
)

// kv is the provider's view of one KV v2 mount.
type kv struct {
	address string
	mount   string
	prefix  string
	// tokenField is the setting the token came from, for the errors that blame it.
	tokenField string
	client     *bao.Client
	api        *bao.KVv2
}

func newKV(address, mount, prefix, token, tokenField string) (*kv, error) {
	cfg := bao.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("OpenBao client configuration: %w", cfg.Error)
	}
	cfg.Address = address
	cfg.Timeout = 30 * time.Second
	c, err := bao.NewClient(cfg)
	if err != nil {
		return nil, sdk.Invalid("settings/address", "OpenBao client for %s: %v", address, err)
	}
	c.SetToken(token)
	return &kv{address: address, mount: mount, prefix: prefix, tokenField: tokenField, client: c, api: c.KVv2(mount)}, nil
}

func (k *kv) instancePath(tenant, instance string) string {
	return k.prefix + "/" + tenant + "/" + instance
}

func (k *kv) filePath(tenant, instance, file string) string {
	return k.instancePath(tenant, instance) + "/" + file
}

// entry is one version of a file as read from KV.
type entry struct {
	version int
	deleted bool // the version's data is deleted or destroyed; its number still counts
	data    map[string]any
}

func (e *entry) ownedBy(tenant, instance string) bool {
	return e.data[fieldTenant] == tenant && e.data[fieldInstance] == instance
}

func (e *entry) value() ([]byte, error) {
	if s, ok := e.data[fieldValueBase64].(string); ok {
		return base64.StdEncoding.DecodeString(s)
	}
	if s, ok := e.data[fieldValue].(string); ok {
		return []byte(s), nil
	}
	return nil, errors.New("the entry holds no value")
}

func (e *entry) generator() string {
	s, _ := e.data[fieldGenerator].(string)
	return s
}

// get reads the latest version (version 0) or a given one; nil when there is none.
func (k *kv) get(ctx context.Context, path string, version int) (*entry, error) {
	var (
		s   *bao.KVSecret
		err error
	)
	if version == 0 {
		s, err = k.api.Get(ctx, path)
	} else {
		s, err = k.api.GetVersion(ctx, path, version)
	}
	if errors.Is(err, bao.ErrSecretNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, k.failed(ctx, opRead, path, err)
	}
	e := &entry{data: s.Data, deleted: s.Data == nil}
	if s.VersionMetadata != nil {
		e.version = s.VersionMetadata.Version
		e.deleted = e.deleted || s.VersionMetadata.Destroyed || !s.VersionMetadata.DeletionTime.IsZero()
	}
	return e, nil
}

// put writes a new version if the current one is still cas, and returns its number.
func (k *kv) put(ctx context.Context, path string, cas int, tenant, instance, generator string, value []byte) (int, error) {
	data := map[string]any{fieldGenerator: generator, fieldTenant: tenant, fieldInstance: instance}
	if utf8.Valid(value) {
		data[fieldValue] = string(value)
	} else {
		data[fieldValueBase64] = base64.StdEncoding.EncodeToString(value)
	}
	s, err := k.api.Put(ctx, path, data, bao.WithCheckAndSet(cas))
	if err != nil {
		return 0, k.failed(ctx, opWrite, path, err)
	}
	if s.VersionMetadata == nil {
		return 0, fmt.Errorf("OpenBao at %s wrote %s but gave no version", k.address, k.full(path))
	}
	return s.VersionMetadata.Version, nil
}

// files lists the keys directly below an instance's path.
func (k *kv) files(ctx context.Context, tenant, instance string) ([]string, error) {
	path := k.instancePath(tenant, instance)
	l, err := k.api.List(ctx, path)
	if err != nil {
		return nil, k.failed(ctx, opList, path, err)
	}
	if l == nil {
		return nil, nil
	}
	var out []string
	for _, key := range l.Keys {
		if !strings.HasSuffix(key, "/") {
			out = append(out, key)
		}
	}
	return out, nil
}

// remove deletes a key's metadata and every version.
func (k *kv) remove(ctx context.Context, path string) error {
	if err := k.api.DeleteMetadata(ctx, path); err != nil {
		return k.failed(ctx, opDelete, path, err)
	}
	return nil
}

func (k *kv) full(path string) string { return k.mount + "/" + path }

// The operations of the provider, with the capability and the API path each needs.
const (
	opRead   = "reading"
	opWrite  = "writing"
	opList   = "listing"
	opDelete = "deleting"
)

// needs names the policy capability and the API path an operation on path needs.
func (k *kv) needs(op, path string) (capability, apiPath string) {
	switch op {
	case opWrite:
		return "create and update", k.mount + "/data/" + path
	case opList:
		return "list", k.mount + "/metadata/" + path
	case opDelete:
		return "delete", k.mount + "/metadata/" + path
	}
	return "read", k.mount + "/data/" + path
}

// failed turns a client error into an sdk error that names the setting at fault and what
// to do.
func (k *kv) failed(ctx context.Context, op, path string, err error) error {
	var re *bao.ResponseError
	if !errors.As(err, &re) {
		return &sdk.Error{Code: sdk.CodeUnavailable, Field: "settings/address", Message: fmt.Sprintf(
			"OpenBao at %s cannot be reached (%s %s): check that settings/address is the server's URL with its scheme and port, and that the server runs and this host can reach it: %v",
			k.address, op, k.full(path), err)}
	}
	msg := strings.Join(re.Errors, "; ")
	switch {
	case re.StatusCode == http.StatusForbidden:
		return k.refused(ctx, op, path, msg)
	case re.StatusCode == http.StatusBadRequest && strings.Contains(msg, "check-and-set"):
		return sdk.Unavailable("%s was written by someone else at the same time (%s): retry", k.full(path), msg)
	case re.StatusCode == http.StatusNotFound:
		return sdk.Invalid("settings/mount", "OpenBao at %s has no KV v2 mount at %q (%s %s): %s", k.address, k.mount, op, k.full(path), msg)
	case re.StatusCode >= 500:
		return sdk.Unavailable("OpenBao at %s answered %d %s %s: %s", k.address, re.StatusCode, op, k.full(path), msg)
	}
	return fmt.Errorf("OpenBao at %s answered %d %s %s: %s", k.address, re.StatusCode, op, k.full(path), msg)
}

// refused tells a token OpenBao does not accept from a token whose policy lacks a
// capability: both are 403 "permission denied", so it asks the server about the token
// itself (auth/token/lookup-self, which the default policy allows) unless the answer
// already said "invalid token", as Vault's does.
func (k *kv) refused(ctx context.Context, op, path, msg string) error {
	valid := !strings.Contains(msg, "invalid token")
	if valid {
		_, err := k.client.Auth().Token().LookupSelfWithContext(ctx)
		var re *bao.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
			valid = false
		} else if err != nil {
			return sdk.Unavailable("OpenBao at %s refused the token %s %s, and looking the token up failed too: %v", k.address, op, k.full(path), err)
		}
	}
	if !valid {
		return sdk.Invalid(k.tokenField, "OpenBao at %s does not accept the token (%s %s was refused, and so was a lookup of the token itself): it is wrong, expired or revoked, or lacks the default policy; set %s to a valid token",
			k.address, op, k.full(path), k.tokenField)
	}
	capability, apiPath := k.needs(op, path)
	return sdk.Invalid(k.tokenField, "OpenBao at %s accepts the token, but its policy does not allow %s on %s: give the token's policy create, read, update, delete and list on %s/data/%s/* and %s/metadata/%s/*",
		k.address, capability, apiPath, k.mount, k.prefix, k.mount, k.prefix)
}
