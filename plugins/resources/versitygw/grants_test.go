package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func provisionOK(t *testing.T, p *provider, tenant, instance, spec string, secrets map[string][]byte) resource.Result {
	t.Helper()
	res, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: instance, Type: "s3", Spec: json.RawMessage(spec), Secrets: secrets})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: instance, Type: "s3", Spec: json.RawMessage(spec)})
	})
	return res
}

// A key has exactly its grants: read on A, write on B, nothing on C of the same tenant nor
// on any bucket of another tenant.
func TestGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t)
	tenant, other := uniqueTenant("gr"), uniqueTenant("go")
	spec := `{"buckets": {"a": {}, "b": {}, "c": {}},
	  "keys": {"k": {"grants": {"a": "read", "b": "write"}}, "o": {"grants": {"c": "owner"}}}}`
	res := provisionOK(t, p, tenant, "main", spec, nil)
	r := result(t, res.Data)
	otherRes := provisionOK(t, p, other, "main", `{"buckets": {"a": {}}, "keys": {"k": {"grants": {"a": "owner"}}}}`, nil)
	otherBucket := result(t, otherRes.Data).Buckets["a"]

	root := s3Client(shared.endpoint, shared.root.AccessKeyID, shared.root.SecretAccessKey)
	for _, b := range []string{r.Buckets["a"], r.Buckets["c"], otherBucket} {
		require.NoError(t, putObject(ctx, root, b, "seed.txt", "seed"))
	}
	k := keyClient(r, res.Secrets, "k")

	got, err := getObject(ctx, k, r.Buckets["a"], "seed.txt")
	require.NoError(t, err, "read grant: get")
	require.Equal(t, "seed", got)
	_, err = k.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Buckets["a"])})
	require.NoError(t, err, "read grant: list")
	requireDenied(t, putObject(ctx, k, r.Buckets["a"], "x.txt", "x"), "read grant: put")
	_, err = k.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(r.Buckets["a"]), Key: aws.String("seed.txt")})
	requireDenied(t, err, "read grant: delete")

	require.NoError(t, putObject(ctx, k, r.Buckets["b"], "x.txt", "x"), "write grant: put")
	got, err = getObject(ctx, k, r.Buckets["b"], "x.txt")
	require.NoError(t, err, "write grant: get")
	require.Equal(t, "x", got)
	_, err = k.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(r.Buckets["b"]), Key: aws.String("x.txt")})
	require.NoError(t, err, "write grant: delete")
	_, err = k.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(r.Buckets["b"]), Policy: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + r.Buckets["b"] + `/*"]}]}`)})
	requireDenied(t, err, "write grant: put policy")

	for _, b := range []string{r.Buckets["c"], otherBucket} {
		_, err := getObject(ctx, k, b, "seed.txt")
		requireDenied(t, err, "no grant: get "+b)
		requireDenied(t, putObject(ctx, k, b, "x.txt", "x"), "no grant: put "+b)
	}

	o := keyClient(r, res.Secrets, "o")
	require.NoError(t, putObject(ctx, o, r.Buckets["c"], "o.txt", "o"), "owner grant: put")
	_, err = o.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(r.Buckets["c"]), Tagging: &typesTagging})
	require.NoError(t, err, "owner grant: bucket tagging")
	_, err = o.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String(r.Buckets["c"])})
	requireDenied(t, err, "owner grant: the policy stays the provider's")
	_, err = getObject(ctx, o, r.Buckets["a"], "seed.txt")
	requireDenied(t, err, "owner grant on c: get a")

	// A key that leaves the request loses its user; the other keys keep their secret.
	again := provisionOK(t, p, tenant, "main", `{"buckets": {"a": {}, "b": {}, "c": {}}, "keys": {"k": {"grants": {"a": "read", "b": "write"}}}}`, res.Secrets)
	require.Equal(t, string(res.Secrets["key-k"]), string(again.Secrets["key-k"]))
	require.Error(t, putObject(ctx, o, r.Buckets["c"], "o2.txt", "o"), "a removed key still writes")
	users, err := shared.admin().listUsers(ctx)
	require.NoError(t, err)
	require.NotContains(t, users, tenant+"-main-o")
	require.Contains(t, users, tenant+"-main-k")
}

var typesTagging = types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String("fedhost")}}}

func requireDenied(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what+": allowed, want denied")
	code := errorCode(err)
	require.Truef(t, code == "AccessDenied" || code == "Forbidden", "%s: %v, want AccessDenied", what, err)
}

// A bucket that exists and belongs to another user is refused, and left as it was.
func TestForeignBucketConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t)
	tenant := uniqueTenant("cf")
	a := shared.admin()
	require.NoError(t, a.createUser(ctx, "someone-"+tenant, "someone-secret-1234", roleUser))
	require.NoError(t, a.createBucket(ctx, tenant+"-media", "someone-"+tenant))
	t.Cleanup(func() {
		_ = (&buckets{s3: s3Client(shared.endpoint, shared.root.AccessKeyID, shared.root.SecretAccessKey), endpoint: shared.endpoint}).remove(ctx, tenant+"-media")
		_ = a.deleteUser(ctx, "someone-"+tenant)
	})
	_, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(`{"buckets": {"media": {}}}`)})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	noSecretIn(t, err, shared.root.SecretAccessKey)
	owners, err := a.listBuckets(ctx)
	require.NoError(t, err)
	require.Equal(t, "someone-"+tenant, owners[tenant+"-media"])
	users, err := a.listUsers(ctx)
	require.NoError(t, err)
	require.NotContains(t, users, tenant+"-main", "a refused provision made the owner user")

	// Deprovision leaves a bucket it does not own alone.
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(`{"buckets": {"media": {}}}`)}))
	owners, err = a.listBuckets(ctx)
	require.NoError(t, err)
	require.Contains(t, owners, tenant+"-media")
}

// A user of role admin is never taken for a key of the provider.
func TestAdminUserNotTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t)
	tenant := uniqueTenant("ad")
	a := shared.admin()
	require.NoError(t, a.createUser(ctx, tenant+"-main-app", "admin-secret-12345678", "admin"))
	t.Cleanup(func() { _ = a.deleteUser(ctx, tenant+"-main-app") })
	_, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(`{"buckets": {"media": {}}, "keys": {"app": {"grants": {"media": "read"}}}}`)})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	users, err := a.listUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, "admin-secret-12345678", users[tenant+"-main-app"].Secret)
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(`{"buckets": {"media": {}}, "keys": {"app": {"grants": {"media": "read"}}}}`)}))
	users, err = a.listUsers(ctx)
	require.NoError(t, err)
	require.Contains(t, users, tenant+"-main-app", "deprovision deleted an admin")
}

// A second provision with the secrets of the first writes nothing: the IAM file and the
// result stay as they were. Not parallel: other tests write the same IAM file.
func TestProvisionChangesNothingTheSecondTime(t *testing.T) {
	p := newProvider(t)
	tenant := uniqueTenant("id")
	spec := `{"buckets": {"site": {"website": true, "cors": [{"allowed_origins": ["*"], "allowed_methods": ["GET"], "allowed_headers": ["*"], "max_age_seconds": 60}]}, "data": {}},
	  "keys": {"app": {"grants": {"site": "owner", "data": "write"}}}}`
	first := provisionOK(t, p, tenant, "main", spec, nil)
	r := result(t, first.Data)
	root := s3Client(shared.endpoint, shared.root.AccessKeyID, shared.root.SecretAccessKey)
	before := bucketState(t, root, r.Buckets["site"])
	iam := filepath.Join(shared.iamDir, "users.json")
	stat, err := os.Stat(iam)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)

	second := provisionOK(t, p, tenant, "main", spec, first.Secrets)
	require.JSONEq(t, string(first.Data), string(second.Data))
	require.Equal(t, first.Secrets, second.Secrets)
	again, err := os.Stat(iam)
	require.NoError(t, err)
	require.Equal(t, stat.ModTime(), again.ModTime(), "the second provision wrote the IAM file")
	require.Equal(t, before, bucketState(t, root, r.Buckets["site"]))
}

// bucketState reads the policy, CORS and website configuration of a bucket.
func bucketState(t *testing.T, c *s3.Client, bucket string) []string {
	t.Helper()
	ctx := context.Background()
	pol, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: &bucket})
	require.NoError(t, err)
	cors, err := c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: &bucket})
	require.NoError(t, err)
	require.Len(t, cors.CORSRules, 1)
	web, err := c.GetBucketWebsite(ctx, &s3.GetBucketWebsiteInput{Bucket: &bucket})
	require.NoError(t, err)
	corsJSON, _ := json.Marshal(cors.CORSRules)
	return []string{aws.ToString(pol.Policy), string(corsJSON), aws.ToString(web.IndexDocument.Suffix)}
}

// public_read and website let anonymous clients read objects; other buckets do not.
func TestPublicRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t)
	tenant := uniqueTenant("pr")
	res := provisionOK(t, p, tenant, "main", `{"buckets": {"pub": {"public_read": true}, "web": {"website": true}, "priv": {}}}`, nil)
	r := result(t, res.Data)
	root := s3Client(shared.endpoint, shared.root.AccessKeyID, shared.root.SecretAccessKey)
	for logical, public := range map[string]bool{"pub": true, "web": true, "priv": false} {
		bucket := r.Buckets[logical]
		require.NoError(t, putObject(ctx, root, bucket, "index.html", "hello"))
		resp, err := http.Get(shared.endpoint + "/" + bucket + "/index.html")
		require.NoError(t, err)
		resp.Body.Close()
		if public {
			require.Equal(t, http.StatusOK, resp.StatusCode, "anonymous read of %s", bucket)
		} else {
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "anonymous read of %s", bucket)
		}
		req, _ := http.NewRequest(http.MethodPut, shared.endpoint+"/"+bucket+"/x.html", strings.NewReader("x"))
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "anonymous write to %s", bucket)
	}
	web, err := root.GetBucketWebsite(ctx, &s3.GetBucketWebsiteInput{Bucket: aws.String(r.Buckets["web"])})
	require.NoError(t, err)
	require.Equal(t, indexDocument, aws.ToString(web.IndexDocument.Suffix))

	// Dropping public_read takes the anonymous access away.
	provisionOK(t, p, tenant, "main", `{"buckets": {"pub": {}, "web": {"website": true}, "priv": {}}}`, res.Secrets)
	resp, err := http.Get(shared.endpoint + "/" + r.Buckets["pub"] + "/index.html")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// A retained deprovision keeps buckets and objects, removes every key, and a provision
// after it adopts the buckets; a full one deletes buckets and users.
func TestDeprovisionRetainThenDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newProvider(t)
	tenant := uniqueTenant("rt")
	spec := `{"buckets": {"backups": {"backup": true}}, "keys": {"restic": {"grants": {"backups": "write"}}}}`
	res := provisionOK(t, p, tenant, "main", spec, nil)
	r := result(t, res.Data)
	k := keyClient(r, res.Secrets, "restic")
	require.NoError(t, putObject(ctx, k, r.Buckets["backups"], "snap", "data"))

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(spec), Retain: true}))
	_, err := getObject(ctx, k, r.Buckets["backups"], "snap")
	require.Error(t, err, "the key still reads after a retained deprovision")
	root := s3Client(shared.endpoint, shared.root.AccessKeyID, shared.root.SecretAccessKey)
	got, err := getObject(ctx, root, r.Buckets["backups"], "snap")
	require.NoError(t, err)
	require.Equal(t, "data", got)

	res2 := provisionOK(t, p, tenant, "main", spec, nil)
	got, err = getObject(ctx, keyClient(result(t, res2.Data), res2.Secrets, "restic"), r.Buckets["backups"], "snap")
	require.NoError(t, err, "the adopted bucket is not readable with the new key")
	require.Equal(t, "data", got)

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(spec)}))
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "s3", Spec: json.RawMessage(spec)}), "a second deprovision")
	owners, err := shared.admin().listBuckets(ctx)
	require.NoError(t, err)
	require.NotContains(t, owners, r.Buckets["backups"])
	users, err := shared.admin().listUsers(ctx)
	require.NoError(t, err)
	require.NotContains(t, users, tenant+"-main")
	require.NotContains(t, users, tenant+"-main-restic")
}

// Wrong or unreachable settings are refused without showing the secret.
func TestConfigureErrorsHideTheSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wrong := "wrong-" + newSecret()
	dead, err := child.FreePort()
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		settings map[string]any
		code     sdk.Code
	}{
		"wrong secret": {map[string]any{"endpoint": shared.endpoint, "access_key": shared.root.AccessKeyID, "secret_key": wrong}, sdk.CodeInvalid},
		"unreachable":  {map[string]any{"endpoint": "http://127.0.0.1:" + strconv.Itoa(dead), "access_key": "root", "secret_key": wrong}, sdk.CodeUnavailable},
		"no secret":    {map[string]any{"endpoint": shared.endpoint, "access_key": "root"}, sdk.CodeInvalid},
		"no data dir":  {map[string]any{"managed": true, "binary": vgwBin}, sdk.CodeInvalid},
		"both secrets": {map[string]any{"endpoint": shared.endpoint, "access_key": "root", "secret_key": wrong, "secret_key_file": "/nonexistent"}, sdk.CodeInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.settings)
			err := (&provider{}).Configure(ctx, raw)
			require.Equal(t, tc.code, sdk.CodeOf(err), "%v", err)
			noSecretIn(t, err, wrong)
			noSecretIn(t, err, shared.root.SecretAccessKey)
		})
	}
}

// The secret key can come from a file.
func TestSecretKeyFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(file, []byte(shared.root.SecretAccessKey+"\n"), 0o600))
	raw, _ := json.Marshal(map[string]any{"endpoint": shared.endpoint, "access_key": shared.root.AccessKeyID, "secret_key_file": file, "public_endpoint": "https://s3.example.net"})
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), raw))
	tenant := uniqueTenant("sf")
	res := provisionOK(t, p, tenant, "main", `{"buckets": {"media": {}}}`, nil)
	r := result(t, res.Data)
	require.Equal(t, "https://s3.example.net", r.Endpoint)
	require.Equal(t, "us-east-1", r.Region)
	require.True(t, r.PathStyle)
	require.Equal(t, map[string]string{"media": tenant + "-media"}, r.Buckets)
}
