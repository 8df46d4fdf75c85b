package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
)

var settingsSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "managed": {"type": "boolean", "description": "Run a versitygw gateway (posix backend) in the plugin's data dir; the default when no endpoint is set"},
    "endpoint": {"type": "string", "pattern": "^https?://", "description": "S3 endpoint URL of a shared versitygw gateway"},
    "admin_endpoint": {"type": "string", "pattern": "^https?://", "description": "Admin API URL, when the gateway serves it on its own port (--admin-port); default endpoint"},
    "access_key": {"type": "string", "minLength": 1, "description": "Access key of the root account (or an account of role admin); for managed, the root access key to use instead of a generated one"},
    "secret_key": {"type": "string", "minLength": 1, "description": "Secret key of that account"},
    "secret_key_file": {"type": "string", "minLength": 1, "description": "File holding the secret key, instead of secret_key"},
    "region": {"type": "string", "minLength": 1, "description": "Region of the gateway; default us-east-1"},
    "public_endpoint": {"type": "string", "pattern": "^https?://", "description": "S3 endpoint URL handed to applications; default endpoint (managed: the loopback address)"},
    "binary": {"type": "string", "minLength": 1, "description": "versitygw executable for the managed gateway; default bin/artifacts/versitygw beside the plugin directory, then PATH"}
  },
  "additionalProperties": false
}`)

const defaultRegion = "us-east-1"

type settings struct {
	Managed        *bool  `json:"managed"`
	Endpoint       string `json:"endpoint"`
	AdminEndpoint  string `json:"admin_endpoint"`
	AccessKey      string `json:"access_key"`
	SecretKey      string `json:"secret_key"`
	SecretKeyFile  string `json:"secret_key_file"`
	Region         string `json:"region"`
	PublicEndpoint string `json:"public_endpoint"`
	Binary         string `json:"binary"`
}

// Configure takes the settings: a shared gateway (endpoint and admin credentials) or the
// managed one, which it starts here. Either way the admin API has answered before it
// returns.
func (p *provider) Configure(ctx context.Context, raw json.RawMessage) error {
	var s settings
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &s); err != nil {
			return sdk.Invalid("settings", "settings are not an object: %v", err)
		}
	}
	if s.Region == "" {
		s.Region = defaultRegion
	}
	creds, err := s.rootCredentials()
	if err != nil {
		return err
	}
	managed := s.Endpoint == ""
	if s.Managed != nil {
		managed = *s.Managed
	}
	if managed {
		return p.configureManaged(ctx, s, creds)
	}
	switch {
	case s.Endpoint == "":
		return sdk.Invalid("settings/endpoint", "managed is false, so the S3 endpoint of a shared versitygw is needed: set endpoint")
	case s.Binary != "":
		return sdk.Invalid("settings/binary", "binary is for the managed gateway, and endpoint names a shared one")
	case creds == nil:
		return sdk.Invalid("settings/access_key", "a shared gateway needs the credentials of its root or an admin account: set access_key and secret_key or secret_key_file")
	}
	gw, err := newGateway(s.Endpoint, s.AdminEndpoint, s.PublicEndpoint, s.Region, *creds)
	if err != nil {
		return err
	}
	if err := gw.check(ctx); err != nil {
		return err
	}
	p.swap(gw, nil)
	hclog.Default().Info("using a shared versitygw gateway", "endpoint", s.Endpoint, "admin_endpoint", gw.admin.endpoint)
	return nil
}

// rootCredentials returns the admin credentials of the settings, or nil when none are set.
func (s settings) rootCredentials() (*aws.Credentials, error) {
	switch {
	case s.SecretKey != "" && s.SecretKeyFile != "":
		return nil, sdk.Invalid("settings/secret_key_file", "set secret_key or secret_key_file, not both")
	case s.AccessKey == "" && s.SecretKey == "" && s.SecretKeyFile == "":
		return nil, nil
	case s.AccessKey == "":
		return nil, sdk.Invalid("settings/access_key", "a secret key is set without its access_key")
	case s.SecretKey == "" && s.SecretKeyFile == "":
		return nil, sdk.Invalid("settings/secret_key", "access_key is set without its secret: set secret_key or secret_key_file")
	}
	secret := s.SecretKey
	if s.SecretKeyFile != "" {
		b, err := os.ReadFile(s.SecretKeyFile)
		if err != nil {
			return nil, sdk.Invalid("settings/secret_key_file", "reading the secret key: %v", err)
		}
		secret = strings.TrimSpace(string(b))
		if secret == "" {
			return nil, sdk.Invalid("settings/secret_key_file", "%s is empty: write the secret key into it", s.SecretKeyFile)
		}
	}
	return &aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: secret, Source: "fedhost settings"}, nil
}

// newGateway connects to a gateway; adminEndpoint and publicEndpoint default to endpoint.
func newGateway(endpoint, adminEndpoint, publicEndpoint, region string, creds aws.Credentials) (*gateway, error) {
	for field, u := range map[string]string{"endpoint": endpoint, "admin_endpoint": adminEndpoint, "public_endpoint": publicEndpoint} {
		if u == "" {
			continue
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.User != nil {
			return nil, sdk.Invalid("settings/"+field, "%q is not an http(s) URL of a gateway, such as http://s3.example.net:7070", u)
		}
	}
	endpoint = strings.TrimRight(endpoint, "/")
	if adminEndpoint == "" {
		adminEndpoint = endpoint
	}
	if publicEndpoint == "" {
		publicEndpoint = endpoint
	}
	hc := &http.Client{Timeout: 5 * time.Minute}
	return &gateway{
		admin:    &admin{endpoint: strings.TrimRight(adminEndpoint, "/"), region: region, creds: creds, http: hc},
		buckets:  &buckets{s3: newS3Client(endpoint, region, creds, hc), endpoint: endpoint},
		endpoint: strings.TrimRight(publicEndpoint, "/"),
		region:   region,
	}, nil
}

// check calls the admin API once: the gateway answers and takes the credentials.
func (g *gateway) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := g.admin.listBuckets(ctx); err != nil {
		if ctx.Err() != nil {
			return sdk.Unavailable("versitygw at %s did not answer the admin API within 15s", g.admin.endpoint)
		}
		return classify(err, "checking the admin API at "+g.admin.endpoint)
	}
	return nil
}
