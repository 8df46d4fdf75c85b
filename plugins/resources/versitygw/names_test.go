package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestNewPlan(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("t", 32)
	for name, tc := range map[string]struct {
		tenant, spec string
		field        string // "" for a valid request
	}{
		"valid":                   {"acme", `{"buckets": {"media": {}}, "keys": {"app": {"grants": {"media": "owner"}}}}`, ""},
		"63 characters":           {long, `{"buckets": {"` + strings.Repeat("b", 30) + `": {}}}`, ""},
		"64 characters":           {long, `{"buckets": {"` + strings.Repeat("b", 31) + `": {}}}`, "request/buckets/" + strings.Repeat("b", 31)},
		"trailing dash":           {"acme", `{"buckets": {"media-": {}}}`, "request/buckets/media-"},
		"no bucket":               {"acme", `{"buckets": {}}`, "request/buckets"},
		"grant of another bucket": {"acme", `{"buckets": {"media": {}}, "keys": {"app": {"grants": {"other": "read"}}}}`, "request/keys/app/grants/other"},
		"unknown grant":           {"acme", `{"buckets": {"media": {}}, "keys": {"app": {"grants": {"media": "admin"}}}}`, "request/keys/app/grants/media"},
		"key without grants":      {"acme", `{"buckets": {"media": {}}, "keys": {"app": {"grants": {}}}}`, "request/keys/app/grants"},
		"not an object":           {"acme", `[]`, "request"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pl, err := newPlan(tc.tenant, "main", json.RawMessage(tc.spec))
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, tc.tenant+"-main", pl.owner)
				return
			}
			require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
			require.Equal(t, tc.field, sdk.FieldOf(err))
		})
	}
}

func TestPlanNames(t *testing.T) {
	t.Parallel()
	pl, err := newPlan("acme", "blog", json.RawMessage(`{"buckets": {"media": {}, "backups": {"backup": true}},
	  "keys": {"app": {"grants": {"media": "write", "backups": "read"}}}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"media": "acme-media", "backups": "acme-backups"}, pl.buckets)
	require.Equal(t, "acme-blog", pl.owner)
	require.Equal(t, keyPlan{user: "acme-blog-app", grants: map[string]string{"acme-media": "write", "acme-backups": "read"}}, pl.keys["app"])
}

func TestBucketPolicy(t *testing.T) {
	t.Parallel()
	require.Nil(t, bucketPolicy("acme-media", nil, false), "a bucket nobody is granted has no policy")

	raw := bucketPolicy("acme-media", map[string]string{"acme-m-r": "read", "acme-m-w": "write", "acme-m-o": "owner", "acme-m-o2": "owner"}, true)
	var doc policyDoc
	require.NoError(t, json.Unmarshal(raw, &doc))
	bySid := map[string]statement{}
	for _, s := range doc.Statement {
		bySid[s.Sid] = s
	}
	require.Equal(t, []string{"acme-m-r"}, bySid["fedhost-read"].Principal.AWS)
	require.Equal(t, actions["read"], bySid["fedhost-read"].Action)
	require.Equal(t, []string{"arn:aws:s3:::acme-media", "arn:aws:s3:::acme-media/*"}, bySid["fedhost-write"].Resource)
	require.Equal(t, []string{"acme-m-o", "acme-m-o2"}, bySid["fedhost-owner"].Principal.AWS)
	require.Equal(t, "Deny", bySid["fedhost-managed"].Effect)
	require.True(t, bySid["fedhost-public-read"].Principal.Public)
	require.Equal(t, []string{"s3:GetObject"}, bySid["fedhost-public-read"].Action)
	require.ElementsMatch(t, []string{"acme-m-r", "acme-m-w", "acme-m-o", "acme-m-o2", "acme-m-o", "acme-m-o2"}, policyPrincipals(raw))
	require.True(t, samePolicy(raw, bucketPolicy("acme-media", map[string]string{"acme-m-o2": "owner", "acme-m-o": "owner", "acme-m-w": "write", "acme-m-r": "read"}, true)))
	require.False(t, samePolicy(raw, bucketPolicy("acme-media", map[string]string{"acme-m-r": "read"}, true)))
}

func TestValidSecret(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		newSecret():                 true,
		"short":                     false,
		"with a space in the value": false,
		strings.Repeat("x", 129):    false,
		"tab\tinside-the-value-xx":  false,
	} {
		require.Equal(t, want, validSecret(s), "%q", s)
	}
	require.Len(t, newSecret(), 40)
	require.NotEqual(t, newSecret(), newSecret())
}
