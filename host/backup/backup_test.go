package backup

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/pgtest"
)

// The tests run real programs: PostgreSQL (internal/pgtest), pg_dump and pg_restore,
// Debian's restic, and a versitygw (the Go tool of the root module) per test. They set
// XDG_CACHE_HOME for restic's cache, so they do not run in parallel.
func TestMain(m *testing.M) { pgtest.Main(m) }

// bundle is what a test works with: a repository target on its own gateway, and a
// database owned by a role that is not a superuser, as the postgresql resource makes.
type bundle struct {
	target Target
	db     Database
	conn   *pgx.Conn // as the owner role
}

func setup(t testing.TB) *bundle {
	t.Helper()
	for _, tl := range []tool{resticTool, pgDumpTool, pgRestoreTool} {
		if _, err := tl.path(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	endpoint, root := startGateway(t)
	// After startGateway: the go command finds its build cache through XDG_CACHE_HOME too.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())

	bucket := "backups-" + strings.ToLower(rand.Text()[:8])
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return root, nil
		}),
	})
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)

	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	cfg := admin.Config()
	role := "app_" + strings.ToLower(rand.Text()[:10])
	password := "pg-" + rand.Text()
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", pgx.Identifier{cfg.Database}.Sanitize(), role))
	require.NoError(t, err)

	b := &bundle{
		target: Target{
			Endpoint:           endpoint,
			Region:             "us-east-1",
			PathStyle:          true,
			Bucket:             bucket,
			AccessKeyID:        root.AccessKeyID,
			SecretAccessKey:    root.SecretAccessKey,
			RepositoryPassword: "repo-" + rand.Text(),
			Path:               "miniflux",
		},
		db: Database{Host: cfg.Host, Port: int(cfg.Port), Database: cfg.Database, User: role, Password: password, SSLMode: "disable"},
	}
	b.conn, err = pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", role, password, cfg.Host, cfg.Port, cfg.Database))
	require.NoError(t, err)
	t.Cleanup(func() { b.conn.Close(context.Background()) })
	return b
}

// secrets are every secret value of the bundle, none of which may appear in an error.
func (b *bundle) secrets() []string {
	return []string{b.target.SecretAccessKey, b.target.RepositoryPassword, b.db.Password}
}

func noSecretIn(t *testing.T, err error, secrets ...string) {
	t.Helper()
	require.Error(t, err)
	t.Logf("error: %v", err)
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s, "an error shows a secret value")
	}
}

var (
	gatewayOnce sync.Once
	gatewayBin  string
	gatewayErr  error
)

// startGateway starts a versitygw with the posix backend in a temp dir and returns its
// endpoint and root credentials.
func startGateway(t testing.TB) (string, aws.Credentials) {
	t.Helper()
	gatewayOnce.Do(func() {
		// The Go tool of the root module (go.mod: tool github.com/versity/versitygw/cmd/versitygw),
		// built into the Go build cache.
		out, err := exec.Command("go", "tool", "-n", "github.com/versity/versitygw/cmd/versitygw").CombinedOutput()
		gatewayBin, gatewayErr = strings.TrimSpace(string(out)), err
		if err != nil {
			gatewayErr = fmt.Errorf("building versitygw: %v\n%s", err, out)
		}
	})
	if gatewayErr != nil {
		t.Fatal(gatewayErr)
	}
	dir := t.TempDir()
	for _, sub := range []string{"data", "iam"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	root := aws.Credentials{AccessKeyID: "testroot", SecretAccessKey: "root-" + rand.Text()}

	logFile, err := os.Create(filepath.Join(dir, "versitygw.log"))
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(gatewayBin, "--port", "127.0.0.1:"+strconv.Itoa(port), "--iam-dir", filepath.Join(dir, "iam"),
		"--health", "/health", "posix", filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+root.AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+root.SecretAccessKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return endpoint, root
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			t.Fatalf("versitygw did not become healthy on %s:\n%s", endpoint, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// feeds makes a table of the owner role with rows.
func (b *bundle) feeds(t *testing.T) {
	t.Helper()
	_, err := b.conn.Exec(context.Background(), `
		CREATE TABLE feeds (id int PRIMARY KEY, url text NOT NULL);
		INSERT INTO feeds VALUES (1, 'https://example.org/a.xml'), (2, 'https://example.org/b.xml')`)
	require.NoError(t, err)
}

func (b *bundle) feedURLs(t *testing.T) []string {
	t.Helper()
	rows, err := b.conn.Query(context.Background(), "SELECT url FROM feeds ORDER BY id")
	require.NoError(t, err)
	urls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return urls
}

func TestBackupRestoreRoundTrip(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)
	list, err := Snapshots(ctx, b.target)
	require.NoError(t, err, "a target with no repository yet has no backups")
	require.Empty(t, list)
	dir := t.TempDir()
	icon := filepath.Join(dir, "icons", "a.png")
	require.NoError(t, os.MkdirAll(filepath.Dir(icon), 0o700))
	require.NoError(t, os.WriteFile(icon, []byte("icon of a"), 0o600))
	tags := map[string]string{"deployment": "d-42", "app": "miniflux", "kind": "scheduled"}

	start := time.Now()
	snap, err := Backup(ctx, b.target, &b.db, []string{filepath.Join(dir, "icons")}, tags)
	require.NoError(t, err)
	t.Logf("backup (repository created) took %v", time.Since(start))
	require.Len(t, snap.ID, 64)
	require.Len(t, snap.FilesID, 64)
	require.WithinDuration(t, time.Now(), snap.Time, time.Minute)

	list, err = Snapshots(ctx, b.target)
	require.NoError(t, err)
	require.Len(t, list, 1, "the files snapshot is part of the backup, not a backup of its own")
	require.Equal(t, snap.ID, list[0].ID)
	require.Equal(t, tags, list[0].Tags)
	require.Equal(t, b.db.Database, list[0].Database)
	require.Equal(t, snap.FilesID, list[0].FilesID)
	require.Equal(t, []string{filepath.Join(dir, "icons")}, list[0].Files)
	require.True(t, snap.Time.Equal(list[0].Time))

	_, err = b.conn.Exec(ctx, "DELETE FROM feeds")
	require.NoError(t, err)
	require.Empty(t, b.feedURLs(t))
	target := t.TempDir()
	start = time.Now()
	require.NoError(t, Restore(ctx, b.target, snap.ID[:8], &b.db, target))
	t.Logf("restore took %v", time.Since(start))
	require.Equal(t, []string{"https://example.org/a.xml", "https://example.org/b.xml"}, b.feedURLs(t))
	got, err := os.ReadFile(filepath.Join(target, icon))
	require.NoError(t, err)
	require.Equal(t, "icon of a", string(got))
}

func TestBackupOfDatabaseAlone(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)
	snap, err := Backup(ctx, b.target, &b.db, nil, map[string]string{"kind": "pre-upgrade"})
	require.NoError(t, err)
	require.Empty(t, snap.FilesID)

	_, err = b.conn.Exec(ctx, "DROP TABLE feeds")
	require.NoError(t, err)
	require.ErrorContains(t, Restore(ctx, b.target, snap.ID, nil, ""), "give the database")
	require.NoError(t, Restore(ctx, b.target, snap.ID, &b.db, ""))
	require.Len(t, b.feedURLs(t), 2)

	err = Restore(ctx, b.target, "0000000000", &b.db, "")
	require.ErrorIs(t, err, ErrSnapshotNotFound)
}

func TestForgetKeepsRecentBackups(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)
	file := filepath.Join(t.TempDir(), "config.yml")
	require.NoError(t, os.WriteFile(file, []byte("a: 1"), 0o600))

	require.NoError(t, Forget(ctx, b.target, 30*24*time.Hour), "a target with no repository yet has nothing to forget")
	old, err := backupAt(ctx, b.target, &b.db, []string{file}, nil, time.Now().Add(-40*24*time.Hour))
	require.NoError(t, err)
	recent, err := Backup(ctx, b.target, &b.db, []string{file}, nil)
	require.NoError(t, err)

	start := time.Now()
	require.NoError(t, Forget(ctx, b.target, 30*24*time.Hour))
	t.Logf("forget --prune took %v", time.Since(start))
	list, err := Snapshots(ctx, b.target)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, recent.ID, list[0].ID)

	// Both restic snapshots of the old backup went, both of the recent one stayed.
	r, err := openRepository(ctx, b.target, false)
	require.NoError(t, err)
	raw, err := r.snapshots(ctx)
	require.NoError(t, err)
	var ids []string
	for _, s := range raw {
		ids = append(ids, s.ID)
	}
	require.ElementsMatch(t, []string{recent.ID, recent.FilesID}, ids)
	require.NotContains(t, ids, old.FilesID)
}

func TestWrongRepositoryPassword(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)
	_, err := Backup(ctx, b.target, &b.db, nil, nil)
	require.NoError(t, err)

	wrong := b.target
	wrong.RepositoryPassword = "wrong-" + rand.Text()
	_, err = Snapshots(ctx, wrong)
	require.ErrorIs(t, err, ErrRepositoryPassword)
	require.ErrorContains(t, err, "password does not open the restic repository")
	noSecretIn(t, err, append(b.secrets(), wrong.RepositoryPassword)...)

	_, err = Backup(ctx, wrong, &b.db, nil, nil)
	require.ErrorIs(t, err, ErrRepositoryPassword, "a backup must not make a second repository")
	noSecretIn(t, err, append(b.secrets(), wrong.RepositoryPassword)...)
}

func TestErrorsHideSecrets(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)

	t.Run("database password", func(t *testing.T) {
		db := b.db
		db.Password = "wrong-" + rand.Text()
		_, err := Backup(ctx, b.target, &db, nil, nil)
		require.ErrorContains(t, err, "pg_dump")
		require.ErrorContains(t, err, "password authentication failed")
		noSecretIn(t, err, append(b.secrets(), db.Password)...)
		// The empty dump restic read must not remain as a backup.
		list, err := Snapshots(ctx, b.target)
		require.NoError(t, err)
		require.Empty(t, list)
	})
	t.Run("database password on restore", func(t *testing.T) {
		snap, err := Backup(ctx, b.target, &b.db, nil, nil)
		require.NoError(t, err)
		db := b.db
		db.Password = "wrong-" + rand.Text()
		err = Restore(ctx, b.target, snap.ID, &db, "")
		require.ErrorContains(t, err, "pg_restore")
		require.ErrorContains(t, err, "password authentication failed")
		noSecretIn(t, err, append(b.secrets(), db.Password)...)
	})
	t.Run("secret access key", func(t *testing.T) {
		target := b.target
		target.SecretAccessKey = "wrong-" + rand.Text()
		_, err := Backup(ctx, target, &b.db, nil, nil)
		require.ErrorContains(t, err, "refuses access key "+target.AccessKeyID)
		noSecretIn(t, err, append(b.secrets(), target.SecretAccessKey)...)
	})
	t.Run("secret in stderr", func(t *testing.T) {
		// A database named like its password makes every message of pg_dump hold it.
		db := b.db
		db.Database = db.Password
		_, err := Backup(ctx, b.target, &db, nil, nil)
		require.ErrorContains(t, err, "[secret]")
		noSecretIn(t, err, b.secrets()...)
	})
}

func TestMissingRestic(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Backup(context.Background(), Target{
		Endpoint: "http://127.0.0.1:1", Bucket: "backups", AccessKeyID: "key", SecretAccessKey: "secret-" + rand.Text(), RepositoryPassword: "repo-" + rand.Text(),
	}, nil, []string{"."}, nil)
	require.ErrorIs(t, err, ErrToolMissing)
	require.ErrorContains(t, err, "apt-get install restic")
}

func TestTagArgs(t *testing.T) {
	for _, tc := range []struct {
		tags    map[string]string
		want    []string
		wantErr string
	}{
		{tags: map[string]string{"kind": "scheduled", "app": "miniflux"}, want: []string{"--tag", "app=miniflux", "--tag", "kind=scheduled"}},
		{tags: map[string]string{"app": "a,b"}, wantErr: "cannot have one"},
		{tags: map[string]string{"a=b": "c"}, wantErr: "no '='"},
		{tags: map[string]string{"part": "files"}, wantErr: "set by the backup itself"},
	} {
		got, err := tagArgs(tc.tags)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

func TestStderrTailStartsAtALine(t *testing.T) {
	var s stderrTail
	secret := "s3cr3t-value"
	rest := strings.Repeat("x", stderrKeep-7-len("\nlast line\n")) + "\nlast line\n"
	// The cut falls inside the secret, which a scrub could no longer find.
	fmt.Fprintf(&s, "%s\n%s", secret, rest)
	require.NotContains(t, string(s.buf), "value")
	require.Equal(t, "last line", s.lines(1, nil))
}

// lockedRestic puts a restic first in PATH that answers the first refusals calls of each
// of the given commands as restic does when another operation holds the repository's
// lock, then runs the real restic; it returns how many refusals were made so far.
func lockedRestic(t *testing.T, refusals int, commands ...string) func() int {
	t.Helper()
	real, err := exec.LookPath("restic")
	require.NoError(t, err)
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do
  case "$a" in %s)
    n=$(cat %q 2>/dev/null || echo 0)
    if [ "$n" -lt %d ]; then
      echo $((n+1)) > %q
      echo "unable to create lock in backend: repository is already locked exclusively by PID 4242 on other by root (UID 0, GID 0)" >&2
      exit 1
    fi;;
  esac
done
exec %q "$@"
`, strings.Join(commands, "|"), count, refusals, count, real)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "restic"), []byte(script), 0o755))
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return func() int {
		b, _ := os.ReadFile(count)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
}

// A backup or a restore that finds the repository locked by another operation (a
// forget's prune, another backup) waits for it, and a listing takes no lock at all.
func TestLockedRepositoryIsWaitedFor(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)
	first, err := Backup(ctx, b.target, &b.db, nil, nil)
	require.NoError(t, err)

	refused := lockedRestic(t, 2, "backup", "dump", "snapshots")
	second, err := Backup(ctx, b.target, &b.db, nil, nil)
	require.NoError(t, err, "the backup waits for the lock")
	require.Equal(t, 2, refused(), "refused twice, then taken")
	require.NoError(t, Restore(ctx, b.target, first.ID, &b.db, ""))
	require.Equal(t, 2, refused(), "the restore's dump was not refused: the count is shared and spent")

	list, err := Snapshots(ctx, b.target)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, second.ID, list[1].ID)

	// A lock that does not go fails the operation after lockWait, saying so.
	t.Setenv("PATH", os.Getenv("PATH")) // restored at the end of the test
	refusedAgain := lockedRestic(t, 1000, "dump")
	defer func(old time.Duration) { lockWait = old }(lockWait)
	lockWait = 2 * time.Second
	err = Restore(ctx, b.target, first.ID, &b.db, "")
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, "try again when it is done")
	require.Greater(t, refusedAgain(), 1, "it was retried before giving up")
}
