package main

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-acme/lego/v5/certcrypto"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/bindtest"
	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/internal/pebbletest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// The servers every test of this package shares, started by TestMain: a named that
// holds the test zones and that pebble resolves every name through, and pebble, which
// answers HTTP-01 challenges on http01Port of 127.0.0.1 (each test zone's address).
var (
	bind         *bindtest.Server
	pebble       *pebbletest.Server
	pluginBinary string
	http01Port   int
)

// blocked is a zone pebble refuses to order for.
const blocked = "blocked.acme.test"

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "named and pebble", func(dir string) (func(), error) {
		for _, d := range []string{"named", "pebble"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				return nil, err
			}
		}
		b, stopBind, err := bindtest.Start(filepath.Join(dir, "named"))
		if err != nil {
			return nil, err
		}
		port, err := child.FreePort()
		if err != nil {
			stopBind()
			return nil, err
		}
		pb, stopPebble, err := pebbletest.Start(filepath.Join(dir, "pebble"), pebbletest.Options{DNSServer: b.DNSAddr, HTTPPort: port, Blocklist: []string{blocked}})
		if err != nil {
			stopBind()
			return nil, err
		}
		stop := func() { stopPebble(); stopBind() }
		bind, pebble, http01Port = b, pb, port
		pluginBinary = filepath.Join(dir, "fedhost-resource-acme")
		if out, err := exec.Command("go", "build", "-o", pluginBinary, ".").CombinedOutput(); err != nil {
			stop()
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		return stop, nil
	})
}

// settingsJSON are the plugin's settings against the test pebble and named, with dir
// for the issued chains. The timeout is generous: on a loaded 2-core CI machine, with
// every package's tests running, one renewal did not finish its order within 60 s.
func settingsJSON(dir string) json.RawMessage {
	return fmt.Appendf(nil, `{"directory_url":%q,"ca_certificates":%q,"resolvers":[%q],"http01_address":"127.0.0.1:%d","timeout_seconds":120,"dir":%q}`,
		pebble.DirectoryURL, pebble.CAFile, bind.DNSAddr, http01Port, dir)
}

var zoneCounter atomic.Int64

// newZone adds a zone no other test uses, with its own update key, and returns the
// zone, the dns part of a tls request for it and the secrets the host would give.
func newZone(t testing.TB) (string, *contract.DNSUpdate, map[string][]byte) {
	t.Helper()
	zone := fmt.Sprintf("z%d-%d.acme.test", os.Getpid()%10000, zoneCounter.Add(1))
	return addZone(t, zone)
}

func addZone(t testing.TB, zone string) (string, *contract.DNSUpdate, map[string][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keyName, alg, secret, err := bind.AddZone(ctx, zone)
	require.NoError(t, err, bind.Log())
	ref := "tsig-" + zone
	return zone, &contract.DNSUpdate{Server: bind.DNSAddr, KeyName: keyName, Algorithm: alg, Secret: contract.SecretRef{Secret: ref}},
		map[string][]byte{ref: []byte(secret)}
}

func tlsRequest(domains []string, challenge string, dns *contract.DNSUpdate) json.RawMessage {
	b, _ := json.Marshal(contract.TLSRequest{Domains: domains, Challenge: challenge, DNS: dns})
	return b
}

// setup is a provider in this process, configured against the test servers.
func setup(t testing.TB) *provider {
	t.Helper()
	p := newProvider()
	require.NoError(t, p.Configure(context.Background(), settingsJSON(t.TempDir())))
	return p
}

// decoded is a tls result with its chain parsed.
type decoded struct {
	contract.TLSResult
	chain []*x509.Certificate
}

func decode(t testing.TB, raw json.RawMessage) decoded {
	t.Helper()
	var d decoded
	require.NoError(t, json.Unmarshal(raw, &d.TLSResult))
	rest := []byte(d.Certificate)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		require.Equal(t, "CERTIFICATE", b.Type, "the chain holds certificates only")
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		d.chain = append(d.chain, c)
	}
	require.GreaterOrEqual(t, len(d.chain), 2, "the chain is the leaf and its issuer")
	return d
}

// keyMatches reports whether the key in secrets is the key of result's certificate.
func keyMatches(secrets map[string][]byte, result json.RawMessage) error {
	var r contract.TLSResult
	if err := json.Unmarshal(result, &r); err != nil {
		return err
	}
	leaf, err := parseLeaf([]byte(r.Certificate))
	if err != nil {
		return err
	}
	key, err := certcrypto.ParsePEMPrivateKey(secrets[keySecret])
	if err != nil {
		return err
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		return errors.New("the key is not the certificate's")
	}
	return nil
}

// provision provisions tenant/main and returns the decoded result and the secrets.
func provision(t testing.TB, p *provider, tenant string, spec json.RawMessage, secrets map[string][]byte) (decoded, map[string][]byte) {
	t.Helper()
	res, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: "main", Type: contract.TLS, Spec: spec, Secrets: secrets})
	require.NoError(t, err, pebble.Log())
	return decode(t, res.Data), res.Secrets
}

// with returns a copy of a with the entries of b.
func with(a, b map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
