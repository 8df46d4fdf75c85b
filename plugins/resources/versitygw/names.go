package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// plan is a request with every physical name worked out and checked.
type plan struct {
	owner   string            // the owner user of the instance: <tenant>-<instance>
	buckets map[string]string // logical -> physical (<tenant>-<logical>)
	options map[string]contract.S3Bucket
	keys    map[string]keyPlan // key name -> key
}

type keyPlan struct {
	user   string            // access key id: <tenant>-<instance>-<key>
	grants map[string]string // physical bucket -> read, write or owner
}

// The S3 bucket naming rules that matter here: 3 to 63 characters of lower case letters,
// digits and dashes, starting and ending with a letter or a digit.
var bucketPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)

// ownerName is the owner user of an instance, and so the ownership marker of its buckets.
func ownerName(tenant, instance string) string { return tenant + "-" + instance }

// keyUser is the access key id of a key of an instance.
func keyUser(tenant, instance, key string) string { return tenant + "-" + instance + "-" + key }

// bucketName is the physical bucket of a logical one.
func bucketName(tenant, logical string) string { return tenant + "-" + logical }

// checkBucketName refuses a physical name S3 does not allow, naming the request field.
func checkBucketName(physical, logical string) error {
	field := "request/buckets/" + logical
	switch {
	case len(physical) > 63:
		return sdk.Invalid(field, "the bucket name %q is %d characters, and S3 allows 63: shorten the bucket name", physical, len(physical))
	case strings.HasPrefix(physical, "xn--") || strings.HasPrefix(physical, "sthree-") ||
		strings.HasSuffix(physical, "-s3alias") || strings.HasSuffix(physical, "--ol-s3"):
		return sdk.Invalid(field, "the bucket name %q uses a prefix or suffix S3 reserves", physical)
	case !bucketPattern.MatchString(physical):
		return sdk.Invalid(field, "the bucket name %q is not 3 to 63 lower case letters, digits and dashes starting and ending with a letter or digit", physical)
	}
	return nil
}

// newPlan reads a request and names what it asks for.
func newPlan(tenant, instance string, spec json.RawMessage) (*plan, error) {
	var r contract.S3Request
	if err := json.Unmarshal(spec, &r); err != nil {
		return nil, sdk.Invalid("request", "the request is not an s3 request: %v", err)
	}
	if len(r.Buckets) == 0 {
		return nil, sdk.Invalid("request/buckets", "the request asks for no bucket")
	}
	p := &plan{
		owner:   ownerName(tenant, instance),
		buckets: map[string]string{},
		options: map[string]contract.S3Bucket{},
		keys:    map[string]keyPlan{},
	}
	for _, logical := range sortedKeys(r.Buckets) {
		physical := bucketName(tenant, logical)
		if err := checkBucketName(physical, logical); err != nil {
			return nil, err
		}
		p.buckets[logical] = physical
		p.options[physical] = r.Buckets[logical]
	}
	for _, name := range sortedKeys(r.Keys) {
		k := keyPlan{user: keyUser(tenant, instance, name), grants: map[string]string{}}
		if len(r.Keys[name].Grants) == 0 {
			return nil, sdk.Invalid("request/keys/"+name+"/grants", "key %q is granted no bucket", name)
		}
		for logical, grant := range r.Keys[name].Grants {
			physical, ok := p.buckets[logical]
			if !ok {
				return nil, sdk.Invalid(fmt.Sprintf("request/keys/%s/grants/%s", name, logical), "key %q is granted bucket %q, which the request does not ask for", name, logical)
			}
			if _, ok := actions[grant]; !ok {
				return nil, sdk.Invalid(fmt.Sprintf("request/keys/%s/grants/%s", name, logical), "grant %q is not read, write or owner", grant)
			}
			k.grants[physical] = grant
		}
		p.keys[name] = k
	}
	return p, nil
}

// keyUsers returns the access key ids of the plan's keys.
func (p *plan) keyUsers() map[string]bool {
	users := map[string]bool{}
	for _, k := range p.keys {
		users[k.user] = true
	}
	return users
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
