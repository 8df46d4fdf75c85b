package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// Provisioned is one resource the kit made: its names, result and secret values.
type Provisioned struct {
	Tenant, Instance string
	Result           json.RawMessage
	Secrets          map[string][]byte
}

// ResourceCase says what the kit asks a provider for and how it looks at the provider's
// real server. The functions talk to that server with the credentials of a result: they
// are the proof that isolation holds, so they must use a real client of the server.
type ResourceCase struct {
	// Type is the resource type under test, one the provider serves.
	Type string
	// Settings are handed to Configure first (nil for none).
	Settings json.RawMessage
	// Request is a valid request; Secrets are its operator-supplied values, if any.
	Request json.RawMessage
	// RequestFor, when set, gives each tenant's request instead of Request, for types
	// whose object one tenant holds alone (a dns zone: two tenants cannot ask for one).
	RequestFor func(tenant string) json.RawMessage
	Secrets    map[string][]byte
	// Invalid is a request the provider must refuse, naming InvalidField (a prefix of the
	// field the error names, e.g. "request/buckets").
	Invalid      json.RawMessage
	InvalidField string
	// Access returns nil when the credentials of from can reach the object of to (read
	// and write), and an error otherwise.
	Access func(ctx context.Context, from, to Provisioned) error
	// Exists reports whether the object of p exists on the server.
	Exists func(ctx context.Context, p Provisioned) (bool, error)
	// DataKept reports whether the data of p survived a deprovision with Retain. Nil
	// skips the retain check for providers that keep nothing.
	DataKept func(ctx context.Context, p Provisioned) (bool, error)
	// Seed writes data into p before a retained deprovision, for DataKept to find.
	Seed func(ctx context.Context, p Provisioned) error
	// Exec says how to run commands in a node, for an instance provider that implements
	// resource.Executor; the kit fails a provider that runs commands and a case that
	// leaves it nil.
	Exec *ExecCase
	// ExecUnchecked, for a provider that runs commands but cannot meet the kit's exec
	// checks as they stand (output recorded and sent after the end, not streamed), says
	// why; the kit then skips them with that reason, and the provider's own tests check
	// its exec.
	ExecUnchecked string
}

// Resource runs the shared checks and then the resource provider checks against the
// binary at path: provisioning twice gives the same result; the result follows the
// type's contract; an invalid request is refused naming its field; tenants cannot reach
// each other's objects; an instance provider that runs commands runs them as
// resource.Executor says (output, exit status, environment, cancel and timeout that
// leave no process); deprovision removes, and keeps the data when told to; and no
// secret value appears in the plugin's logs. Before it returns it deprovisions what it
// made, and fails the test if that fails, so a run leaves nothing on the server.
func Resource(t *testing.T, path string, c ResourceCase) {
	t.Helper()
	Plugin(t, path)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	dataDir := t.TempDir()
	start := func(ctx context.Context) (*client.Plugin, error) {
		p, err := client.Start(ctx, path, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+dataDir))
		if err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
		if err := p.Configure(ctx, c.Settings); err != nil {
			p.Kill()
			return nil, fmt.Errorf("configure: %w", err)
		}
		return p, nil
	}
	p, err := start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Kill() }()
	rc := p.Resource()
	if rc == nil {
		t.Fatalf("%s is a %s plugin, not a resource provider", path, p.Description().Kind)
	}
	request := func(tenant string) json.RawMessage {
		if c.RequestFor != nil {
			return c.RequestFor(tenant)
		}
		return c.Request
	}
	var seen []Provisioned
	suffix := fmt.Sprintf("%04d", time.Now().UnixNano()%10000)
	tenantA, tenantB := "conf-a"+suffix, "conf-b"+suffix
	provision := func(t *testing.T, tenant string, secrets map[string][]byte) Provisioned {
		t.Helper()
		in := map[string][]byte{}
		for k, v := range c.Secrets {
			in[k] = v
		}
		for k, v := range secrets {
			in[k] = v
		}
		res, err := rc.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: c.Type, Spec: request(tenant), Secrets: in})
		if err != nil {
			t.Fatalf("provision %s/main: %v", tenant, err)
		}
		pr := Provisioned{Tenant: tenant, Instance: "main", Result: res.Data, Secrets: res.Secrets}
		seen = append(seen, pr)
		return pr
	}
	deprovision := func(t *testing.T, p Provisioned, retain bool) {
		t.Helper()
		err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: p.Tenant, Instance: p.Instance, Type: c.Type, Spec: request(p.Tenant), Retain: retain})
		if err != nil {
			t.Fatalf("deprovision %s/%s (retain %v): %v", p.Tenant, p.Instance, retain, err)
		}
	}
	exists := func(t *testing.T, p Provisioned) bool {
		t.Helper()
		ok, err := c.Exists(ctx, p)
		if err != nil {
			t.Fatalf("exists %s/%s: %v", p.Tenant, p.Instance, err)
		}
		return ok
	}

	// cleanUp removes both tenants' objects through a live plugin, a new one on the same
	// settings and data dir if the first has died, and fails the test if it cannot: a run
	// must leave the provider's server as it found it.
	cleaned := false
	cleanUp := func() {
		if cleaned {
			return
		}
		cleaned = true
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if p.Exited() {
			again, err := start(ctx)
			if err != nil {
				t.Errorf("cleanup: the plugin died and a new one did not start, so the objects of %s/main and %s/main are left on the server: %v", tenantA, tenantB, err)
				return
			}
			p, rc = again, again.Resource()
		}
		for _, tenant := range []string{tenantA, tenantB} {
			err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: c.Type, Spec: request(tenant)})
			if err != nil {
				t.Errorf("cleanup: deprovision %s/main failed, so its objects are left on the server: %v", tenant, err)
			}
		}
	}
	defer cleanUp()

	a := provision(t, tenantA, nil)

	t.Run("result_follows_contract", func(t *testing.T) {
		if !contract.Known(c.Type) {
			return
		}
		if err := contract.ValidateResult(c.Type, a.Result); err != nil {
			t.Errorf("result: %v", err)
		}
		var refs []string
		collectSecretRefs(a.Result, &refs)
		for _, ref := range refs {
			if _, ok := a.Secrets[ref]; !ok {
				t.Errorf("the result refers to secret %q, which the provider did not return", ref)
			}
		}
		// The host keeps each returned secret as a file of the secret resource, whose
		// names are DNS labels.
		for name := range a.Secrets {
			if !sdk.ValidInstance(name) {
				t.Errorf("returned secret %q is not a DNS label (a-z, 0-9 and inner hyphens, at most 63): the host cannot keep it in the secret resource", name)
			}
		}
	})

	t.Run("provision_is_idempotent", func(t *testing.T) {
		again := provision(t, tenantA, a.Secrets)
		if !jsonEqual(a.Result, again.Result) {
			t.Errorf("a second provision changed the result:\nfirst  %s\nsecond %s", a.Result, again.Result)
		}
		for k, v := range a.Secrets {
			if w, ok := again.Secrets[k]; ok && !bytes.Equal(v, w) {
				t.Errorf("a second provision, given the secrets of the first, changed secret %q", k)
			}
		}
		if !exists(t, a) {
			t.Errorf("the object of %s/main does not exist after provision", tenantA)
		}
		if err := c.Access(ctx, a, a); err != nil {
			t.Errorf("the credentials of %s/main cannot reach its own object: %v", tenantA, err)
		}
	})

	t.Run("exec", func(t *testing.T) {
		if !runsCommands(ctx, rc, c.Type, tenantA) {
			if c.Exec != nil {
				t.Fatalf("the case gives Exec, but the provider answers that it runs no commands")
			}
			return
		}
		if c.Exec == nil && c.ExecUnchecked != "" {
			t.Skip(c.ExecUnchecked)
		}
		if c.Exec == nil {
			t.Fatalf("the provider runs commands (resource.Executor): give the case's Exec so that the kit checks them")
		}
		checkExec(t, ctx, rc, c.Type, a, *c.Exec)
	})

	t.Run("invalid_request_names_field", func(t *testing.T) {
		if c.Invalid == nil {
			t.Fatalf("the case gives no invalid request")
		}
		_, err := rc.Provision(ctx, resource.Request{Tenant: tenantA, Instance: "invalid", Type: c.Type, Spec: c.Invalid})
		if sdk.CodeOf(err) != sdk.CodeInvalid {
			t.Fatalf("an invalid request gave %v, want code %s", err, sdk.CodeInvalid)
		}
		if !strings.HasPrefix(sdk.FieldOf(err), c.InvalidField) {
			t.Errorf("the refusal names field %q, want %q", sdk.FieldOf(err), c.InvalidField)
		}
		_, err = rc.Provision(ctx, resource.Request{Tenant: "Not A Tenant", Instance: "main", Type: c.Type, Spec: request(tenantA)})
		if sdk.CodeOf(err) != sdk.CodeInvalid || sdk.FieldOf(err) != "tenant" {
			t.Errorf("a bad tenant name gave %v, want an invalid_request naming tenant", err)
		}
	})

	t.Run("tenant_isolation", func(t *testing.T) {
		b := provision(t, tenantB, nil)
		if err := c.Access(ctx, b, b); err != nil {
			t.Fatalf("the credentials of %s/main cannot reach its own object: %v", tenantB, err)
		}
		if err := c.Access(ctx, a, b); err == nil {
			t.Errorf("tenant %s's credentials reach tenant %s's object", tenantA, tenantB)
		}
		if err := c.Access(ctx, b, a); err == nil {
			t.Errorf("tenant %s's credentials reach tenant %s's object", tenantB, tenantA)
		}
	})

	t.Run("deprovision", func(t *testing.T) {
		b := provision(t, tenantB, nil)
		if c.DataKept != nil {
			if c.Seed != nil {
				if err := c.Seed(ctx, b); err != nil {
					t.Fatalf("seed: %v", err)
				}
			}
			deprovision(t, b, true)
			kept, err := c.DataKept(ctx, b)
			if err != nil {
				t.Fatalf("data kept: %v", err)
			}
			if !kept {
				t.Errorf("a deprovision with retain removed the data of %s/main", tenantB)
			}
			b = provision(t, tenantB, nil)
		}
		deprovision(t, b, false)
		if exists(t, b) {
			t.Errorf("the object of %s/main still exists after deprovision", tenantB)
		}
		deprovision(t, b, false)
		if c.DataKept != nil {
			if kept, err := c.DataKept(ctx, b); err == nil && kept {
				t.Errorf("the data of %s/main survived a deprovision without retain", tenantB)
			}
		}
		if err := c.Access(ctx, a, a); err != nil {
			t.Errorf("removing %s's object broke %s's: %v", tenantB, tenantA, err)
		}
	})

	cleanUp()
	t.Run("no_secret_in_logs", func(t *testing.T) {
		p.Kill()
		text := logs.String()
		for _, pr := range seen {
			for name, v := range pr.Secrets {
				if len(v) >= 6 && strings.Contains(text, string(v)) {
					t.Errorf("the value of secret %q of %s/%s appears in the plugin's logs", name, pr.Tenant, pr.Instance)
				}
			}
		}
		for name, v := range c.Secrets {
			if len(v) >= 6 && strings.Contains(text, string(v)) {
				t.Errorf("the supplied value of %q appears in the plugin's logs", name)
			}
		}
	})
}

func collectSecretRefs(raw json.RawMessage, out *[]string) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["secret"].(string); ok && len(x) == 1 {
				*out = append(*out, s)
				return
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
