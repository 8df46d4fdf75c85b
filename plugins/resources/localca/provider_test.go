package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/contract"
)

// setup opens a provider on dir whose clock the test moves.
func setup(t *testing.T, dir string, clock *time.Time) *provider {
	t.Helper()
	p := &provider{now: func() time.Time { return *clock }}
	raw, err := json.Marshal(settings{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, p.Configure(context.Background(), raw))
	return p
}

// A certificate is given again while it has more than 30 days left; from 30 days before
// its expiry a provision issues a new one.
func TestRenewedThirtyDaysBeforeExpiry(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	p := setup(t, t.TempDir(), &clock)
	ctx := context.Background()
	first, err := p.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(t, err)
	serial := decode(t, first.Data).leaf.SerialNumber

	clock = clock.Add(leafLifetime - renewBefore - time.Hour)
	again, err := p.Provision(ctx, provisionReq("web", request, first.Secrets))
	require.NoError(t, err)
	require.Equal(t, serial, decode(t, again.Data).leaf.SerialNumber, "31 days left")

	clock = clock.Add(2 * time.Hour)
	renewed, err := p.Provision(ctx, provisionReq("web", request, first.Secrets))
	require.NoError(t, err)
	d := decode(t, renewed.Data)
	require.NotEqual(t, serial, d.leaf.SerialNumber, "29 days left")
	require.WithinDuration(t, clock.Add(leafLifetime), d.leaf.NotAfter, time.Second)
	require.NotEqual(t, first.Secrets[keySecret], renewed.Secrets[keySecret])
}

// The key of another instance does not make its certificate given again.
func TestAnotherInstancesKeyIssuesANewCertificate(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	p := setup(t, t.TempDir(), &clock)
	ctx := context.Background()
	web, err := p.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(t, err)
	api, err := p.Provision(ctx, provisionReq("api", request, nil))
	require.NoError(t, err)
	again, err := p.Provision(ctx, provisionReq("web", request, api.Secrets))
	require.NoError(t, err)
	require.NotEqual(t, decode(t, web.Data).leaf.SerialNumber, decode(t, again.Data).leaf.SerialNumber)
}

// The CA's files are checked at start: a key others may read, or a root whose key is
// gone, stops the provider with an error saying what to do.
func TestCAFilesAreChecked(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	ctx := context.Background()

	dir := t.TempDir()
	setup(t, dir, &clock)
	require.NoError(t, os.Chmod(filepath.Join(dir, keyFileName), 0o644))
	raw, _ := json.Marshal(settings{Dir: dir})
	err := newProvider().Configure(ctx, raw)
	require.ErrorContains(t, err, "chmod 600")

	dir = t.TempDir()
	setup(t, dir, &clock)
	require.NoError(t, os.Remove(filepath.Join(dir, keyFileName)))
	raw, _ = json.Marshal(settings{Dir: dir})
	err = newProvider().Configure(ctx, raw)
	require.ErrorContains(t, err, "restore the key from a backup")

	// A key whose root was lost gets a new root for the same key.
	dir = t.TempDir()
	p := setup(t, dir, &clock)
	key := p.ca.key
	require.NoError(t, os.Remove(filepath.Join(dir, rootFileName)))
	again := setup(t, dir, &clock)
	require.True(t, key.Equal(again.ca.key))
	require.True(t, key.PublicKey.Equal(again.ca.root.PublicKey))
	res, err := again.Provision(ctx, provisionReq("web", request, nil))
	require.NoError(t, err)
	require.NoError(t, contract.ValidateResult(contract.TLS, res.Data))
}
