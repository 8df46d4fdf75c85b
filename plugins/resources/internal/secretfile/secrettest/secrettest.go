// Package secrettest is the conformance case of the secret providers: Access and Exists
// reveal references through a second process of the plugin under test, started on the
// same settings, so that every check goes through the real plugin.
package secrettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Request asks for one file of every kind.
const Request = `{"files":{
  "password":{"generate":{"length":24}},
  "token":{"generate":{"length":16,"encoding":"hex"}},
  "cookie":{"generate":{"length":32,"encoding":"base64url"}},
  "signing":{"generate":{"key_pair":"ed25519"}},
  "tls-key":{"generate":{"key_pair":"ecdsa-p256"}},
  "smtp-password":{"supplied":true}
}}`

// Supplied are the operator's values of Request.
func Supplied() map[string][]byte {
	return map[string][]byte{"smtp-password": []byte("operator-supplied-smtp-password")}
}

// Start starts the plugin binary with settings, without a data directory, and returns its
// resource client; the process is killed when tb ends.
func Start(tb testing.TB, binary string, settings json.RawMessage) *resource.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.Start(ctx, binary, client.WithEnv(sdk.DataDirEnv+"="))
	require.NoError(tb, err)
	tb.Cleanup(p.Kill)
	require.NoError(tb, p.Configure(ctx, settings))
	return p.Resource()
}

// RevealAll reveals every reference of to's result as from's tenant and instance.
func RevealAll(ctx context.Context, rc *resource.Client, from, to conformance.Provisioned) error {
	var res contract.SecretResult
	if err := json.Unmarshal(to.Result, &res); err != nil {
		return err
	}
	if len(res.Files) == 0 {
		return errors.New("the result names no files")
	}
	for name, f := range res.Files {
		if _, err := rc.Reveal(ctx, from.Tenant, from.Instance, f.Ref); err != nil {
			return fmt.Errorf("file %s: %w", name, err)
		}
	}
	return nil
}

// Case is the conformance case of the secret provider binary on settings. Access(from,
// to) reveals to's references as from; Exists and DataKept reveal p's own.
func Case(tb testing.TB, binary string, settings json.RawMessage) conformance.ResourceCase {
	rc := Start(tb, binary, settings)
	exists := func(ctx context.Context, p conformance.Provisioned) (bool, error) {
		err := RevealAll(ctx, rc, p, p)
		if sdk.CodeOf(err) == sdk.CodeNotFound {
			return false, nil
		}
		return err == nil, err
	}
	return conformance.ResourceCase{
		Type:         contract.Secret,
		Settings:     settings,
		Request:      json.RawMessage(Request),
		Secrets:      Supplied(),
		Invalid:      json.RawMessage(`{"files":{"missing":{"supplied":true}}}`),
		InvalidField: "request/files/missing",
		Access: func(ctx context.Context, from, to conformance.Provisioned) error {
			return RevealAll(ctx, rc, from, to)
		},
		Exists:   exists,
		DataKept: exists,
	}
}
