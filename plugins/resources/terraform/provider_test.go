package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

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

// start runs the plugin on settings and its own data dir; its logs go to the buffer.
func start(t testing.TB, settings json.RawMessage, dataDir string) (*resource.Client, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	p, err := client.Start(ctx, binary, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+dataDir))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, settings))
	return p.Resource(), logs
}

func request(tenant, spec string, secrets map[string][]byte) resource.Request {
	return resource.Request{Tenant: tenant, Instance: "db", Type: contract.PostgreSQL, Spec: json.RawMessage(spec), Secrets: secrets}
}

func deprovision(t *testing.T, rc *resource.Client, tenant string) {
	t.Helper()
	require.NoError(t, rc.Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: "db", Type: contract.PostgreSQL, Spec: json.RawMessage(`{}`)}))
}

// A module with a syntax error fails the provision naming the module, the file and the
// line; one that lacks an output of the result names that output.
func TestModuleErrorsNameFileLineAndOutput(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	ctx := context.Background()

	rc, _ := start(t, settingsFor(t, h, pg, "syntax", nil), t.TempDir())
	_, err := rc.Provision(ctx, request("errs", `{}`, nil))
	require.Error(t, err)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "settings/modules/postgresql", sdk.FieldOf(err))
	require.Contains(t, err.Error(), moduleDir("syntax"))
	require.Contains(t, err.Error(), "main.tf line 5", "the file:line of the error")
	require.NotContains(t, err.Error(), "/runs/", "the run's copy is named as the module")

	rc, _ = start(t, settingsFor(t, h, pg, "nooutput", nil), t.TempDir())
	_, err = rc.Provision(ctx, request("errs", `{}`, nil))
	require.Error(t, err)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), `no output "password"`)
	deprovision(t, rc, "errs")
}

// A request whose plan would replace the database (another list of extensions) is
// refused naming the resource, and the database stays as it was; the first request
// again changes nothing.
func TestPlanThatReplacesIsRefused(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	ctx := context.Background()
	rc, _ := start(t, settingsFor(t, h, pg, "postgresql", nil), t.TempDir())
	first, err := rc.Provision(ctx, request("replace", `{}`, nil))
	require.NoError(t, err)
	t.Cleanup(func() { deprovision(t, rc, "replace") })

	_, err = rc.Provision(ctx, request("replace", `{"extensions":["pg_trgm"]}`, first.Secrets))
	require.Error(t, err)
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "replace terraform_data.database")

	conn, err := pg.connectSuper(ctx, "replace_db")
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&n))
	require.Zero(t, n, "nothing was applied")

	again, err := rc.Provision(ctx, request("replace", `{}`, first.Secrets))
	require.NoError(t, err)
	require.JSONEq(t, string(first.Data), string(again.Data))
}

// A lock left by a run that crashed: younger than stale_lock_after it fails the
// provision naming the lock and what to do, and stays; older, the provider releases it
// and the provision goes on.
func TestLockOfACrashedRun(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	ctx := context.Background()
	b := backend{url: h.address + "/locked/db", user: "fedhost", password: token(h.stateKey, "locked", "db"), client: http.DefaultClient}
	crashed := lockInfo{ID: "6b1c0f1e-crashed-run", Operation: "OperationTypeApply", Who: "root@fedhost", Version: "1.11.4", Created: time.Now().Add(-time.Hour)}
	body, err := json.Marshal(crashed)
	require.NoError(t, err)
	status, _, err := b.do(ctx, "LOCK", "", body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	rc, _ := start(t, settingsFor(t, h, pg, "postgresql", map[string]any{"stale_lock_after": "2h"}), t.TempDir())
	_, err = rc.Provision(ctx, request("locked", `{}`, nil))
	require.Error(t, err)
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), crashed.ID)
	require.Contains(t, err.Error(), "force-unlock")
	row, err := h.store.TerraformStateOf(ctx, "locked", "db")
	require.NoError(t, err)
	require.Equal(t, crashed.ID, row.LockID, "a young lock stays")

	rc, logs := start(t, settingsFor(t, h, pg, "postgresql", map[string]any{"stale_lock_after": "30m"}), t.TempDir())
	res, err := rc.Provision(ctx, request("locked", `{}`, nil))
	require.NoError(t, err)
	t.Cleanup(func() { deprovision(t, rc, "locked") })
	require.NoError(t, contract.ValidateResult(contract.PostgreSQL, res.Data))
	require.Contains(t, logs.String(), "releasing a stale terraform state lock")
	row, err = h.store.TerraformStateOf(ctx, "locked", "db")
	require.NoError(t, err)
	require.Empty(t, row.LockID, "released, and Terraform's own lock given back")
	require.NotEmpty(t, row.Sealed, "the state was written")
}

// The password the module made is in Result.Secrets only: not in the result, the
// plugin's logs, the data dir (the run's var file and plan are gone) or the stored state.
func TestSecretOnlyInSecrets(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	ctx := context.Background()
	dataDir := t.TempDir()
	rc, logs := start(t, settingsFor(t, h, pg, "postgresql", nil), dataDir)
	res, err := rc.Provision(ctx, request("secret", `{}`, nil))
	require.NoError(t, err)
	password := string(res.Secrets["password"])
	require.Len(t, password, 64)
	again, err := rc.Provision(ctx, request("secret", `{}`, res.Secrets))
	require.NoError(t, err)
	require.Equal(t, res.Secrets, again.Secrets)
	// The host lost its copy: the state still knows the password.
	lost, err := rc.Provision(ctx, request("secret", `{}`, nil))
	require.NoError(t, err)
	require.Equal(t, password, string(lost.Secrets["password"]))
	deprovision(t, rc, "secret")

	require.NotContains(t, string(res.Data), password)
	require.Contains(t, logs.String(), "terraform module applied", "the logs were captured")
	require.NotContains(t, logs.String(), password)
	require.NoError(t, filepath.Walk(dataDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NotContains(t, string(b), password, path)
		return nil
	}))
	entries, err := os.ReadDir(filepath.Join(dataDir, "runs"))
	require.NoError(t, err)
	require.Empty(t, entries, "every run's directory is removed")
	_, err = h.store.TerraformStateOf(ctx, "secret", "db")
	require.Error(t, err, "a deprovision forgets the state")
}

// A state key that is not the host's opens no workspace: the provision fails naming
// state_key, and nothing is made.
func TestWrongStateKeyIsRefused(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	ctx := context.Background()
	rc, _ := start(t, settingsFor(t, h, pg, "postgresql", map[string]any{"state_key": strings.Repeat("k", 64)}), t.TempDir())
	_, err := rc.Provision(ctx, request("wrongkey", `{}`, nil))
	require.Error(t, err)
	require.Equal(t, "settings/state_key", sdk.FieldOf(err), "%v", err)
	exists, err := pg.databaseExists(ctx, "wrongkey_db")
	require.NoError(t, err)
	require.False(t, exists)
}

// A Terraform killed (SIGKILL) in the middle of an apply leaves its lock at the host; the
// next provision, once the lock is older than stale_lock_after, releases it and goes on.
func TestLockLeftByAKilledTerraform(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	ctx := context.Background()
	dir := t.TempDir()
	main, err := os.ReadFile(filepath.Join("testdata", "sleeper", "main.tf"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), main, 0o600))
	address := h.address + "/killed/db"
	env := append(os.Environ(), "TF_HTTP_ADDRESS="+address, "TF_HTTP_LOCK_ADDRESS="+address, "TF_HTTP_UNLOCK_ADDRESS="+address,
		"TF_HTTP_USERNAME=fedhost", "TF_HTTP_PASSWORD="+token(h.stateKey, "killed", "db"), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	terraform := func(args ...string) *exec.Cmd {
		cmd := exec.Command("terraform", args...)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the kill takes its sleep too
		return cmd
	}
	out, err := terraform("init", "-input=false", "-no-color").CombinedOutput()
	require.NoError(t, err, "%s", out)
	apply := terraform("apply", "-auto-approve", "-input=false", "-no-color")
	require.NoError(t, apply.Start())
	require.Eventually(t, func() bool {
		row, err := h.store.TerraformStateOf(ctx, "killed", "db")
		return err == nil && row.LockID != ""
	}, time.Minute, 100*time.Millisecond, "terraform apply took the lock")
	require.NoError(t, syscall.Kill(-apply.Process.Pid, syscall.SIGKILL))
	_ = apply.Wait()
	row, err := h.store.TerraformStateOf(ctx, "killed", "db")
	require.NoError(t, err)
	left := row.LockID
	require.NotEmpty(t, left, "a killed run leaves its lock")

	time.Sleep(1100 * time.Millisecond)
	rc, logs := start(t, settingsFor(t, h, pg, "postgresql", map[string]any{"stale_lock_after": "1s"}), t.TempDir())
	res, err := rc.Provision(ctx, request("killed", `{}`, nil))
	require.NoError(t, err)
	t.Cleanup(func() { deprovision(t, rc, "killed") })
	require.NoError(t, contract.ValidateResult(contract.PostgreSQL, res.Data))
	require.Contains(t, logs.String(), left, "the released lock is named in the log")
	row, err = h.store.TerraformStateOf(ctx, "killed", "db")
	require.NoError(t, err)
	require.Empty(t, row.LockID)
}

// A module that needs a provider not in the mirror fails at init naming the provider:
// Terraform asks no registry.
func TestNoRegistryIsAsked(t *testing.T) {
	t.Parallel()
	h, pg := startHost(t), newPostgres(t)
	mirror := t.TempDir()
	rc, _ := start(t, settingsFor(t, h, pg, "registry", map[string]any{"provider_mirror": mirror}), t.TempDir())
	_, err := rc.Provision(context.Background(), request("registry", `{}`, nil))
	require.Error(t, err)
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "terraform init")
	require.Contains(t, err.Error(), "hashicorp/random")
	require.Contains(t, err.Error(), "found in any of the search locations")
	require.Contains(t, err.Error(), "- "+mirror, "the mirror is the only place searched")
}
