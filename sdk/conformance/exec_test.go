package conformance_test

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// runExec runs the kit's exec checks on the test instance provider built as variant
// and returns their failures.
func runExec(t *testing.T, variant string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fedhost-resource-instance-test")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.variant="+variant, "-o", bin, "./testdata/instance").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := client.Start(ctx, bin, client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: io.Discard})))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	rc := p.Resource()
	spec, _ := json.Marshal(contract.InstanceRequest{Artifact: contract.Artifact{Binary: "sh"}, Env: map[string]string{"DATA_DIR": "data"}})
	if _, err := rc.Provision(ctx, resource.Request{Tenant: "kit", Instance: "main", Type: contract.Instance, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conformance.CheckExec(rec, ctx, rc, contract.Instance, conformance.Provisioned{Tenant: "kit", Instance: "main"},
			conformance.ExecCase{Shell: "sh", EnvName: "DATA_DIR", EnvValue: "data"})
	}()
	<-done
	if err := rc.Deprovision(ctx, resource.DeprovisionRequest{Tenant: "kit", Instance: "main", Type: contract.Instance, Spec: spec}); err != nil {
		t.Error(err)
	}
	return rec.failures
}

func TestExecChecksPassASoundProvider(t *testing.T) {
	if f := runExec(t, "sound"); len(f) > 0 {
		t.Errorf("a sound provider failed the exec checks:\n%s", strings.Join(f, "\n"))
	}
}

// A provider whose cancelled commands take longer to go than the kit's look (3 s against
// 2 s) passes: the client's Exec returns once the provider says the command is gone.
func TestExecChecksPassAProviderThatStopsSlowly(t *testing.T) {
	if f := runExec(t, "slow-stop"); len(f) > 0 {
		t.Errorf("a provider whose commands stop slowly failed the exec checks:\n%s", strings.Join(f, "\n"))
	}
}

// A provider whose cancel returns and leaves the command running fails: the processes
// are still there.
func TestExecChecksCatchACancelThatLeavesTheProcess(t *testing.T) {
	f := runExec(t, "leaves-process")
	if len(f) == 0 || !strings.Contains(strings.Join(f, "\n"), "still running after Exec returned") {
		t.Errorf("a provider whose cancel leaves the command running passed: %q", f)
	}
}
