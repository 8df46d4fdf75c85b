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
	api     *bao.KVv2
}

func newKV(address, mount, prefix, token string) (*kv, error) {
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
	return &kv{address: address, mount: mount, prefix: prefix, api: c.KVv2(mount)}, nil
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
		return nil, k.failed("reading", path, err)
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
		return 0, k.failed("writing", path, err)
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
		return nil, k.failed("listing", path, err)
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
		return k.failed("deleting", path, err)
	}
	return nil
}

func (k *kv) full(path string) string { return k.mount + "/" + path }

// failed turns a client error into an sdk error that names the path and what to do.
func (k *kv) failed(op, path string, err error) error {
	var re *bao.ResponseError
	if !errors.As(err, &re) {
		return sdk.Unavailable("OpenBao at %s cannot be reached (%s %s): %v", k.address, op, k.full(path), err)
	}
	msg := strings.Join(re.Errors, "; ")
	switch {
	case re.StatusCode == http.StatusForbidden:
		return sdk.Invalid("settings/token", "OpenBao at %s refused the token %s %s: give its policy create, read, update, delete and list on %s/data/%s/* and %s/metadata/%s/*",
			k.address, op, k.full(path), k.mount, k.prefix, k.mount, k.prefix)
	case re.StatusCode == http.StatusBadRequest && strings.Contains(msg, "check-and-set"):
		return sdk.Unavailable("%s was written by someone else at the same time (%s): retry", k.full(path), msg)
	case re.StatusCode == http.StatusNotFound:
		return sdk.Invalid("settings/mount", "OpenBao at %s has no KV v2 mount at %q (%s %s): %s", k.address, k.mount, op, k.full(path), msg)
	case re.StatusCode >= 500:
		return sdk.Unavailable("OpenBao at %s answered %d %s %s: %s", k.address, re.StatusCode, op, k.full(path), msg)
	}
	return fmt.Errorf("OpenBao at %s answered %d %s %s: %s", k.address, re.StatusCode, op, k.full(path), msg)
}
