package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// secretKey is the name of the TSIG secret in Result.Secrets and Request.Secrets.
const secretKey = "tsig-secret"

// provider serves the dns type on the configured servers. One call at a time changes the
// keys file and the zones.
type provider struct {
	mu  sync.Mutex
	cfg *config
}

// keyName is the TSIG key of one instance: its labels cannot collide between instances
// since no tenant or instance name has a dot.
func keyName(tenant, instance string) string { return instance + "." + tenant + ".fedhost." }

// lock takes the plugin's lock and the keys file's (a file lock beside it, so that two
// plugin processes on one primary take turns too); unlock gives both back.
func (p *provider) lock() (c *config, unlock func(), err error) {
	p.mu.Lock()
	if p.cfg == nil {
		p.mu.Unlock()
		return nil, nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first request")
	}
	c = p.cfg
	f, err := os.OpenFile(c.keysFile+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		p.mu.Unlock()
		return nil, nil, sdk.Unavailable("settings/keys_file: the lock file beside it: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		p.mu.Unlock()
		return nil, nil, sdk.Unavailable("settings/keys_file: locking: %v", err)
	}
	return c, func() {
		f.Close() // releases the flock
		p.mu.Unlock()
	}, nil
}

// Validate checks a request without reaching the servers.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	_, err := parseRequest(spec, 300)
	return err
}

// Provision makes sure the instance's key is known to named, its zone exists on the
// primary granting updates to that key alone, and the zone holds exactly the records
// asked for; then it waits until every server answers them.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	c, unlock, err := p.lock()
	if err != nil {
		return resource.Result{}, err
	}
	defer unlock()
	w, err := parseRequest(req.Spec, c.ttl)
	if err != nil {
		return resource.Result{}, err
	}
	name := keyName(req.Tenant, req.Instance)
	key, err := c.ensureKey(ctx, name, w.zone, req.Secrets[secretKey])
	if err != nil {
		return resource.Result{}, err
	}
	created, err := c.ensureZone(ctx, key)
	if err != nil {
		return resource.Result{}, err
	}
	if created {
		if err := waitZone(ctx, c.servers, c.wait, w.zone, false); err != nil {
			return resource.Result{}, err
		}
	}
	s := signer{key}
	changed, err := s.converge(ctx, c.primary, w.zone, w.rrs)
	if err != nil {
		return resource.Result{}, err
	}
	check := changed
	for k := range rrsets(w.rrs) {
		if !slices.Contains(changed, k) {
			check = append(check, k)
		}
	}
	if err := waitServed(ctx, c.servers, c.wait, w.rrs, check); err != nil {
		return resource.Result{}, err
	}
	data, err := json.Marshal(c.result(w, name))
	if err != nil {
		return resource.Result{}, err
	}
	hclog.Default().Info("zone ready", "zone", w.zone, "key", name, "created", created, "record_sets_changed", len(changed))
	return resource.Result{Data: data, Secrets: map[string][]byte{secretKey: []byte(key.secret)}}, nil
}

func (c *config) result(w wanted, key string) contract.DNSResult {
	ns := make([]string, len(c.nameservers))
	for i, n := range c.nameservers {
		ns[i] = strings.TrimSuffix(n, ".")
	}
	records := w.records
	if records == nil {
		records = []contract.DNSRecord{}
	}
	return contract.DNSResult{
		Zone: strings.TrimSuffix(w.zone, "."), Nameservers: ns, Records: records,
		Update: &contract.DNSUpdate{Server: c.updateServer, KeyName: key, Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: secretKey}},
	}
}

// ensureKey puts the instance's key for zone into the keys file and has named read it,
// when it is not there as it should be. The secret is the one given back by the host,
// else the one in the file, else a new one of 32 random bytes.
func (c *config) ensureKey(ctx context.Context, name, zone string, given []byte) (zoneKey, error) {
	keys, err := readKeys(c.keysFile)
	if err != nil {
		return zoneKey{}, sdk.Unavailable("settings/keys_file: %v", err)
	}
	for _, k := range keys {
		if k.zone == zone && k.name != name {
			return zoneKey{}, sdk.Errorf(sdk.CodeConflict, "zone %s belongs to another deployment on this provider: a domain is held by one deployment", strings.TrimSuffix(zone, "."))
		}
	}
	old, had := keys[name]
	secret := old.secret
	if len(given) > 0 {
		if b, err := base64.StdEncoding.DecodeString(string(given)); err != nil || len(b) < 32 {
			return zoneKey{}, sdk.Invalid("secrets/"+secretKey, "the TSIG secret given back is not 32 or more bytes in base64: clear it so that a new one is made")
		}
		secret = string(given)
	}
	if secret == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return zoneKey{}, err
		}
		secret = base64.StdEncoding.EncodeToString(b)
	}
	key := zoneKey{name: name, zone: zone, secret: secret}
	if had && old == key {
		return key, nil
	}
	if had && old.zone != zone {
		// The deployment moved to another domain: its old zone goes.
		if err := c.removeZone(ctx, old); err != nil {
			return zoneKey{}, err
		}
	}
	keys[name] = key
	if err := writeKeys(c.keysFile, keys); err != nil {
		return zoneKey{}, sdk.Unavailable("settings/keys_file: %v", err)
	}
	if err := c.rndc.reconfig(ctx); err != nil {
		return zoneKey{}, err
	}
	return key, nil
}

// ensureZone adds the key's zone on the primary unless it is there; a zone that is there
// and grants updates to another key (or none) is not the instance's.
func (c *config) ensureZone(ctx context.Context, key zoneKey) (created bool, err error) {
	zone := strings.TrimSuffix(key.zone, ".")
	conf, err := c.rndc.showzone(ctx, zone)
	switch {
	case err == nil:
		if grantee(conf) != key.name {
			return false, sdk.Errorf(sdk.CodeConflict, "zone %s is on the primary and does not belong to this deployment: a domain is held by one deployment", zone)
		}
		return false, nil
	case !errors.Is(err, errNoZone):
		return false, err
	}
	file := filepath.Join(c.zonesDir, zone+".db")
	var b strings.Builder
	fmt.Fprintf(&b, "$TTL %d\n@ IN SOA %s %s 1 3600 600 1209600 %d\n", c.ttl, c.nameservers[0], c.contact, c.ttl)
	for _, ns := range c.nameservers {
		fmt.Fprintf(&b, "@ IN NS %s\n", ns)
	}
	_ = os.Remove(file + ".jnl") // a journal left by an earlier zone of that name does not fit the new file
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return false, sdk.Unavailable("settings/zones_directory: writing the zone file of %s: %v", zone, err)
	}
	if err := c.rndc.addzone(ctx, zone, file, key.name); err != nil {
		return false, err
	}
	return true, nil
}

// removeZone deletes key's zone from the primary if it is the key's, and waits until no
// server serves it.
func (c *config) removeZone(ctx context.Context, key zoneKey) error {
	zone := strings.TrimSuffix(key.zone, ".")
	conf, err := c.rndc.showzone(ctx, zone)
	if errors.Is(err, errNoZone) {
		return nil
	}
	if err != nil {
		return err
	}
	if grantee(conf) != key.name {
		return nil // not this key's zone: leave it
	}
	if err := c.rndc.delzone(ctx, zone); err != nil {
		return err
	}
	return waitZone(ctx, c.servers, c.wait, key.zone, true)
}

// Deprovision deletes the instance's zone (records, file and journal) and its key. A zone
// or key that is gone is not an error; Retain changes nothing, since the zone holds only
// what the request asks for.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	c, unlock, err := p.lock()
	if err != nil {
		return err
	}
	defer unlock()
	name := keyName(req.Tenant, req.Instance)
	keys, err := readKeys(c.keysFile)
	if err != nil {
		return sdk.Unavailable("settings/keys_file: %v", err)
	}
	key, had := keys[name]
	if !had {
		// The key is gone; a zone of the request that still grants it is removed too.
		zone, err := zoneOf(req.Spec)
		if err != nil {
			return nil
		}
		key = zoneKey{name: name, zone: zone}
	}
	if err := c.removeZone(ctx, key); err != nil {
		return err
	}
	if had {
		delete(keys, name)
		if err := writeKeys(c.keysFile, keys); err != nil {
			return sdk.Unavailable("settings/keys_file: %v", err)
		}
		if err := c.rndc.reconfig(ctx); err != nil {
			return err
		}
	}
	hclog.Default().Info("zone removed", "zone", key.zone, "key", name)
	return nil
}

// Status is ready when the instance's zone is on the primary, grants its key and holds
// the records of the request; missing otherwise.
func (p *provider) Status(ctx context.Context, req resource.Request) (resource.Status, error) {
	c, unlock, err := p.lock()
	if err != nil {
		return resource.Status{}, err
	}
	defer unlock()
	w, err := parseRequest(req.Spec, c.ttl)
	if err != nil {
		return resource.Status{}, err
	}
	name := keyName(req.Tenant, req.Instance)
	keys, err := readKeys(c.keysFile)
	if err != nil {
		return resource.Status{}, sdk.Unavailable("settings/keys_file: %v", err)
	}
	key, ok := keys[name]
	if !ok || key.zone != w.zone {
		return resource.Status{State: "missing", Message: fmt.Sprintf("zone %s has no key of this deployment", strings.TrimSuffix(w.zone, "."))}, nil
	}
	conf, err := c.rndc.showzone(ctx, strings.TrimSuffix(w.zone, "."))
	if errors.Is(err, errNoZone) {
		return resource.Status{State: "missing", Message: fmt.Sprintf("zone %s is not on the primary", strings.TrimSuffix(w.zone, "."))}, nil
	}
	if err != nil {
		return resource.Status{}, err
	}
	if grantee(conf) != name {
		return resource.Status{State: "missing", Message: fmt.Sprintf("zone %s on the primary does not grant this deployment's key", strings.TrimSuffix(w.zone, "."))}, nil
	}
	have, err := signer{key}.served(ctx, c.primary, w.zone)
	if err != nil {
		return resource.Status{}, err
	}
	haveSets := rrsets(have)
	for k, want := range rrsets(w.rrs) {
		if !sameSet(haveSets[k], want) {
			return resource.Status{State: "missing", Message: fmt.Sprintf("the primary does not serve %s as asked: provision again", k)}, nil
		}
	}
	data, err := json.Marshal(c.result(w, name))
	if err != nil {
		return resource.Status{}, err
	}
	return resource.Status{State: "ready", Data: data}, nil
}

var (
	_ resource.Provider       = (*provider)(nil)
	_ resource.StatusReporter = (*provider)(nil)
	_ resource.Validator      = (*provider)(nil)
	_ sdk.Configurer          = (*provider)(nil)
)
