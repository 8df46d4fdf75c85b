package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/sshtest"
)

// A Miniflux whose node runs on another machine, reached by SSH (a real sshd on
// loopback, its host key pinned), and whose database comes from the hosting provider's
// Terraform module (terraform_data and psql against a real PostgreSQL, its state kept
// by the host): its sign-in page answers, and a destroy removes both the node and the
// database.
func TestMinifluxOnSSHWithATerraformDatabase(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sshd"), 0o700))
	sshd, stop, err := sshtest.Start(filepath.Join(dir, "sshd"))
	require.NoError(t, err)
	t.Cleanup(stop)
	workDir := filepath.Join(dir, "remote-work")
	require.NoError(t, os.Mkdir(workDir, 0o700))

	admin := pgtest.DSN(t)
	u, err := url.Parse(admin)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	module, err := filepath.Abs("../../plugins/resources/terraform/testdata/postgresql")
	require.NoError(t, err)

	hcl := fmt.Sprintf(`
resource "secret" { provider = "embedded" }
resource "s3" {
  provider = "versitygw"
  settings = { managed = true }
}
resource "postgresql" {
  provider = "terraform"
  settings = {
    modules = {
      postgresql = { dir = %q, variables = { admin_url = %q, pg_host = %q, pg_port = %d } }
    }
  }
}
resource "instance" {
  provider = "ssh"
  settings = {
    machines = [{ name = "remote", address = %q, user = %q, host_key = %q,
                  artifacts_dir = %q, work_dir = %q, listen_host = "127.0.0.1" }]
    private_key_file        = %q
    connect_timeout_seconds = 10
  }
}
`, module, admin, u.Hostname(), port, sshd.Addr, sshd.User, sshd.HostKey, filepath.Join(binDir, "artifacts"), workDir, sshd.ClientKeyFile)
	path := filepath.Join(dir, "fedhost.hcl")
	require.NoError(t, os.WriteFile(path, []byte(hcl), 0o600))
	h := startHost(t, "FEDHOST_CONFIG="+path)

	d := h.create("remote")
	b := h.wait(h.submit(d.ID, minifluxConfig("remote.example.org", nil)).ID)
	require.Equal(t, "succeeded", b.State, "%+v\n%s", b, h.log.String())
	dep := h.deployment(d.ID)
	providers := map[string]string{}
	for _, r := range dep.Resources {
		providers[r.Name] = r.Provider
	}
	require.Equal(t, "terraform", providers["miniflux-db"])
	require.Equal(t, "ssh", providers["miniflux-web"])
	addr := dep.Nodes["miniflux-web"]["http"]
	require.Contains(t, signInPage(t, addr), "<title>Sign In - Miniflux</title>", "Miniflux answers from the machine reached by SSH")
	nodes, err := filepath.Glob(filepath.Join(workDir, "remote", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, nodes, "the node's working directory is on the machine")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	databaseExists := func() bool {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = 'remote_miniflux_db'`).Scan(&n))
		return n == 1
	}
	require.True(t, databaseExists(), "the module made the database")

	var destroy build
	require.Equal(t, 202, h.call("DELETE", "/deployments/"+d.ID, nil, &destroy))
	require.Equal(t, "succeeded", h.wait(destroy.ID).State)
	require.False(t, databaseExists(), "terraform destroy removed the database")
	left, err := filepath.Glob(filepath.Join(workDir, "remote", "*"))
	require.NoError(t, err)
	require.Empty(t, left, "the node's working directory is removed")
}
