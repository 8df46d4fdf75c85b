package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

const conformanceRequest = `{
  "buckets": {"media": {"cors": [{"allowed_origins": ["https://app.example"], "allowed_methods": ["GET", "PUT"]}]}},
  "keys": {"app": {"grants": {"media": "write"}}}
}`

// conformanceCase checks the provider through real S3 calls against the gateway at the
// result's endpoint, with root for the admin checks.
func conformanceCase(settings json.RawMessage, root aws.Credentials) conformance.ResourceCase {
	parse := func(p conformance.Provisioned) (contract.S3Result, error) {
		var r contract.S3Result
		err := json.Unmarshal(p.Result, &r)
		return r, err
	}
	return conformance.ResourceCase{
		Type:         contract.S3,
		Settings:     settings,
		Request:      json.RawMessage(conformanceRequest),
		Invalid:      json.RawMessage(`{"buckets": {"media": {}}, "keys": {"app": {"grants": {"other": "read"}}}}`),
		InvalidField: "request/keys/app/grants/other",
		Access: func(ctx context.Context, from, to conformance.Provisioned) error {
			rf, err := parse(from)
			if err != nil {
				return err
			}
			rt, err := parse(to)
			if err != nil {
				return err
			}
			c := keyClient(rf, from.Secrets, "app")
			bucket := rt.Buckets["media"]
			if err := putObject(ctx, c, bucket, "access.txt", from.Tenant); err != nil {
				return err
			}
			got, err := getObject(ctx, c, bucket, "access.txt")
			if err != nil {
				return err
			}
			if got != from.Tenant {
				return fmt.Errorf("read %q back, want %q", got, from.Tenant)
			}
			return nil
		},
		Exists: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			r, err := parse(p)
			if err != nil {
				return false, err
			}
			owners, err := adminOf(r.Endpoint, root).listBuckets(ctx)
			if err != nil {
				return false, err
			}
			_, ok := owners[r.Buckets["media"]]
			return ok, nil
		},
		Seed: func(ctx context.Context, p conformance.Provisioned) error {
			r, err := parse(p)
			if err != nil {
				return err
			}
			return putObject(ctx, keyClient(r, p.Secrets, "app"), r.Buckets["media"], "seed.txt", "kept "+p.Tenant)
		},
		DataKept: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			r, err := parse(p)
			if err != nil {
				return false, err
			}
			root := s3Client(r.Endpoint, root.AccessKeyID, root.SecretAccessKey)
			got, err := getObject(ctx, root, r.Buckets["media"], "seed.txt")
			if err != nil {
				return false, err
			}
			return got == "kept "+p.Tenant, nil
		},
	}
}

func TestConformanceShared(t *testing.T) {
	conformance.Resource(t, pluginBin, conformanceCase(shared.settings(), shared.root))
}

// The managed gateway is given root credentials in the settings so that the checks can
// use its admin API; TestManagedGateway covers generated ones.
func TestConformanceManaged(t *testing.T) {
	root := aws.Credentials{AccessKeyID: "managedroot", SecretAccessKey: "managed-" + newSecret()}
	settings, _ := json.Marshal(map[string]any{"managed": true, "binary": vgwBin, "access_key": root.AccessKeyID, "secret_key": root.SecretAccessKey})
	conformance.Resource(t, pluginBin, conformanceCase(settings, root))
}
