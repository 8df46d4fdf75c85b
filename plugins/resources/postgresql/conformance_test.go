package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fedhost/fedhost/sdk/conformance"
)

func TestConformanceShared(t *testing.T) {
	t.Parallel()
	srv := newSharedServer(t)
	bin := buildPlugin(t, t.TempDir())
	c := checks{superDSN: func(context.Context) (string, error) { return srv.superDSN, nil }}
	conformance.Resource(t, bin, c.resourceCase(map[string]any{"url": srv.adminDSN}))

	// The kit cleaned up after itself: no role or database of its tenants is left.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.superDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left []string
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'conf-%' UNION ALL SELECT rolname FROM pg_roles WHERE rolname LIKE 'conf-%'")
	if err == nil {
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the kit left roles and databases on the server: %v", left)
	}
}

// TestConformanceManaged runs the kit against the plugin's own cluster, in the data dir
// the kit gives the plugin. As root, the cluster runs as the postgres user.
func TestConformanceManaged(t *testing.T) {
	t.Parallel()
	bin := buildPlugin(t, t.TempDir())
	// The kit's data dir is a sibling of ours, below the test's temp root, which Go makes
	// 0700: let the cluster's user through, as a provider would.
	root := filepath.Dir(filepath.Dir(bin))
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	pid := 0
	c := checks{superDSN: func(context.Context) (string, error) {
		dir, err := managedClusterDir(root)
		if err != nil {
			return "", err
		}
		if pid == 0 {
			b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
			if err != nil {
				return "", fmt.Errorf("the managed cluster is not running: %w", err)
			}
			pid, _ = strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
		}
		return managedSuperDSN(dir)
	}}
	conformance.Resource(t, bin, c.resourceCase(map[string]any{"managed": true}))

	// The kit killed the plugin at its end: the postmaster must follow it.
	if pid <= 0 {
		t.Fatalf("the postmaster's pid was never read")
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the postmaster (pid %d) still runs 30s after the plugin stopped", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// managedClusterDir finds the cluster the plugin made in the kit's data dir, the one
// temp dir under root with a cluster.
func managedClusterDir(root string) (string, error) {
	ports, err := filepath.Glob(filepath.Join(root, "*", "cluster", portFile))
	if err != nil || len(ports) != 1 {
		return "", fmt.Errorf("want one managed cluster below %s, found %v (%v)", root, ports, err)
	}
	return filepath.Dir(ports[0]), nil
}

// managedSuperDSN reads the superuser's DSN from the files of a managed cluster.
func managedSuperDSN(dir string) (string, error) {
	pw, err := os.ReadFile(filepath.Join(dir, passwordFile))
	if err != nil {
		return "", err
	}
	port, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		return "", err
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, strings.TrimSpace(string(pw))),
		Host:     net.JoinHostPort("127.0.0.1", strings.TrimSpace(string(port))),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return u.String(), nil
}
