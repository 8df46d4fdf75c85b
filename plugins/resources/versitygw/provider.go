package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// provider serves the s3 resource type on one versitygw gateway.
type provider struct {
	mu      sync.Mutex
	gw      *gateway
	managed *managedGateway // nil in shared mode
}

// gateway is what the provider knows of the gateway it provisions on.
type gateway struct {
	admin   *admin
	buckets *buckets
	// endpoint and region are handed to applications.
	endpoint string
	region   string
}

func (p *provider) current() (*gateway, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gw == nil {
		return nil, sdk.Unavailable("the plugin has no settings yet: the host configures it before the first request")
	}
	return p.gw, nil
}

// swap installs new settings and stops a managed gateway no longer used.
func (p *provider) swap(gw *gateway, m *managedGateway) {
	p.mu.Lock()
	old := p.managed
	p.gw, p.managed = gw, m
	p.mu.Unlock()
	if old != nil && old != m {
		old.stop()
	}
}

// close stops the managed gateway.
func (p *provider) close() { p.swap(nil, nil) }

// secretRef names the entry of Result.Secrets that holds a key's secret.
func secretRef(key string) string { return "key-" + key }

// Validate checks the physical names and the grants of a request.
func (p *provider) Validate(_ context.Context, _ string, spec json.RawMessage) error {
	// The tenant is not known here: check with the shortest one, so that only what no
	// tenant could have is refused; Provision checks the lengths with the real tenant.
	_, err := newPlan("t", "i", spec)
	return err
}

// Provision makes the buckets of the request (owned by the instance's owner user), a user
// per key with the secret given back or a new one, and the bucket policies that give each
// key exactly its grants. It changes nothing that is already so.
func (p *provider) Provision(ctx context.Context, req resource.Request) (resource.Result, error) {
	gw, err := p.current()
	if err != nil {
		return resource.Result{}, err
	}
	pl, err := newPlan(req.Tenant, req.Instance, req.Spec)
	if err != nil {
		return resource.Result{}, err
	}
	log := hclog.Default().With("tenant", req.Tenant, "instance", req.Instance)

	owners, err := gw.admin.listBuckets(ctx)
	if err != nil {
		return resource.Result{}, classify(err, "listing the buckets")
	}
	for _, logical := range sortedKeys(pl.buckets) {
		physical := pl.buckets[logical]
		if owner, ok := owners[physical]; ok && owner != pl.owner {
			return resource.Result{}, sdk.Conflict("bucket %s exists and belongs to another account (%s), not to %s: choose another bucket name", physical, owner, pl.owner)
		}
	}
	users, err := gw.admin.listUsers(ctx)
	if err != nil {
		return resource.Result{}, classify(err, "listing the users")
	}
	if err := ensureUser(ctx, gw.admin, users, pl.owner, "", log); err != nil {
		return resource.Result{}, err
	}
	secrets := map[string][]byte{}
	result := contract.S3Result{Endpoint: gw.endpoint, Region: gw.region, PathStyle: true, Buckets: pl.buckets, Keys: map[string]contract.S3Access{}}
	for _, name := range sortedKeys(pl.keys) {
		k := pl.keys[name]
		ref := secretRef(name)
		secret := string(req.Secrets[ref])
		if secret != "" && !validSecret(secret) {
			return resource.Result{}, sdk.Invalid("secrets/"+ref, "the secret given back for key %q is not 16 to 128 printable characters without spaces", name)
		}
		if secret == "" {
			secret = newSecret()
		}
		if err := ensureUser(ctx, gw.admin, users, k.user, secret, log); err != nil {
			return resource.Result{}, err
		}
		secrets[ref] = []byte(secret)
		result.Keys[name] = contract.S3Access{AccessKeyID: k.user, SecretAccessKey: contract.SecretRef{Secret: ref}}
	}

	// Principals of the instance's policies that are no longer keys of the request lose
	// their user once no policy names them.
	stale := map[string]bool{}
	for _, physical := range sortedKeys(pl.options) {
		opts := pl.options[physical]
		if _, ok := owners[physical]; !ok {
			if err := gw.admin.createBucket(ctx, physical, pl.owner); err != nil {
				return resource.Result{}, classify(err, "creating bucket "+physical)
			}
			log.Info("created bucket", "bucket", physical, "owner", pl.owner)
		}
		have, err := gw.buckets.policy(ctx, physical)
		if err != nil {
			return resource.Result{}, err
		}
		addPrincipals(stale, have, pl.owner)
		grants := map[string]string{}
		for _, k := range pl.keys {
			if g, ok := k.grants[physical]; ok {
				grants[k.user] = g
			}
		}
		if err := gw.buckets.setPolicy(ctx, physical, have, bucketPolicy(physical, grants, opts.PublicRead || opts.Website)); err != nil {
			return resource.Result{}, err
		}
		if err := gw.buckets.setCORS(ctx, physical, opts.CORS); err != nil {
			return resource.Result{}, err
		}
		if err := gw.buckets.setWebsite(ctx, physical, opts.Website); err != nil {
			return resource.Result{}, err
		}
	}
	// Buckets the instance owns that the request no longer asks for keep their objects
	// and lose every key's access; a deprovision deletes them.
	for _, physical := range sortedKeys(owners) {
		if owners[physical] != pl.owner || pl.has(physical) {
			continue
		}
		have, err := gw.buckets.policy(ctx, physical)
		if err != nil {
			return resource.Result{}, err
		}
		addPrincipals(stale, have, pl.owner)
		if err := gw.buckets.setPolicy(ctx, physical, have, nil); err != nil {
			return resource.Result{}, err
		}
	}
	for user := range pl.keyUsers() {
		delete(stale, user)
	}
	if err := deleteUsers(ctx, gw.admin, users, stale, log); err != nil {
		return resource.Result{}, err
	}

	data, err := json.Marshal(result)
	if err != nil {
		return resource.Result{}, err
	}
	return resource.Result{Data: data, Secrets: secrets}, nil
}

// has reports whether the plan asks for the physical bucket.
func (p *plan) has(physical string) bool {
	_, ok := p.options[physical]
	return ok
}

// addPrincipals adds to set the principals of a policy that are users of the instance.
func addPrincipals(set map[string]bool, policy []byte, owner string) {
	for _, user := range policyPrincipals(policy) {
		if strings.HasPrefix(user, owner+"-") {
			set[user] = true
		}
	}
}

// ensureUser makes user exist with role user and, unless secret is "", that secret. A
// user of another role is not the provider's: it is refused, never changed.
func ensureUser(ctx context.Context, a *admin, users map[string]account, user, secret string, log hclog.Logger) error {
	acc, ok := users[user]
	switch {
	case ok && acc.Role != roleUser:
		return sdk.Conflict("versitygw user %s exists with role %s, and the users this provider makes have role user: it is not this instance's", user, acc.Role)
	case ok && (secret == "" || acc.Secret == secret):
		return nil
	case ok:
		// The host lost the secret (or was never given it): the key gets a new one.
		if err := a.setSecret(ctx, user, secret); err != nil {
			return classify(err, "setting the secret of user "+user)
		}
		log.Info("set a new secret for a key user", "user", user)
		return nil
	}
	if secret == "" {
		// The owner user only marks ownership: nobody is given its secret.
		secret = newSecret()
	}
	if err := a.createUser(ctx, user, secret, roleUser); err != nil {
		return classify(err, "creating user "+user)
	}
	users[user] = account{Access: user, Secret: secret, Role: roleUser}
	log.Info("created user", "user", user)
	return nil
}

// deleteUsers deletes those of names that exist with role user.
func deleteUsers(ctx context.Context, a *admin, users map[string]account, names map[string]bool, log hclog.Logger) error {
	for _, user := range sortedKeys(names) {
		acc, ok := users[user]
		if !ok || acc.Role != roleUser {
			continue
		}
		if err := a.deleteUser(ctx, user); err != nil {
			return classify(err, "deleting user "+user)
		}
		delete(users, user)
		log.Info("deleted user", "user", user)
	}
	return nil
}

// Deprovision removes the key users and the policies that let them in. Without Retain it
// also deletes the instance's buckets with their objects, and its owner user. With Retain
// the buckets, their objects and the owner user stay, so that a later provision of the
// same instance adopts them; no credential handed out reaches them any more.
func (p *provider) Deprovision(ctx context.Context, req resource.DeprovisionRequest) error {
	gw, err := p.current()
	if err != nil {
		return err
	}
	owner := ownerName(req.Tenant, req.Instance)
	log := hclog.Default().With("tenant", req.Tenant, "instance", req.Instance)
	keyUsers := map[string]bool{}
	if pl, err := newPlan(req.Tenant, req.Instance, req.Spec); err == nil {
		keyUsers = pl.keyUsers()
	}
	owners, err := gw.admin.listBuckets(ctx)
	if err != nil {
		return classify(err, "listing the buckets")
	}
	users, err := gw.admin.listUsers(ctx)
	if err != nil {
		return classify(err, "listing the users")
	}
	for _, physical := range sortedKeys(owners) {
		if owners[physical] != owner {
			continue
		}
		have, err := gw.buckets.policy(ctx, physical)
		if err != nil {
			return err
		}
		addPrincipals(keyUsers, have, owner)
		if req.Retain {
			if err := gw.buckets.setPolicy(ctx, physical, have, nil); err != nil {
				return err
			}
			log.Info("kept bucket, removed its policy", "bucket", physical)
			continue
		}
		if err := gw.buckets.remove(ctx, physical); err != nil {
			return err
		}
		log.Info("deleted bucket", "bucket", physical)
	}
	if !req.Retain {
		keyUsers[owner] = true
	}
	return deleteUsers(ctx, gw.admin, users, keyUsers, log)
}

// newSecret returns 40 random base32 characters (200 bits).
func newSecret() string {
	return rand.Text() + rand.Text()[:14]
}

// validSecret accepts what SigV4 can sign with and an application can carry in a
// variable: 16 to 128 printable ASCII characters without spaces.
func validSecret(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

var (
	_ resource.Provider  = (*provider)(nil)
	_ resource.Validator = (*provider)(nil)
	_ sdk.Configurer     = (*provider)(nil)
)
