package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-ldap/ldap/v3"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// startGateway starts a versitygw (the root module's Go tool) with the posix backend and
// returns its endpoint and root credentials.
func startGateway(t *testing.T) (string, aws.Credentials) {
	t.Helper()
	out, err := exec.Command("go", "tool", "-n", "github.com/versity/versitygw/cmd/versitygw").CombinedOutput()
	require.NoError(t, err, "building versitygw: %s", out)
	dir := t.TempDir()
	for _, sub := range []string{"data", "iam"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	endpoint := "http://127.0.0.1:" + port
	root := aws.Credentials{AccessKeyID: "testroot", SecretAccessKey: "root-" + rand.Text()}
	logFile, err := os.Create(filepath.Join(dir, "versitygw.log"))
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(strings.TrimSpace(string(out)), "--port", "127.0.0.1:"+port, "--iam-dir", filepath.Join(dir, "iam"), "--health", "/health", "posix", filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+root.AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+root.SecretAccessKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(endpoint + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return endpoint, root
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			t.Fatalf("versitygw did not become healthy on %s:\n%s", endpoint, log)
		}
	}
}

// readOnlyKey makes a versitygw user that the bucket's policy lets only read, as a
// source's export mints for a migration string.
func readOnlyKey(t *testing.T, endpoint, bucket string, root aws.Credentials, client *s3.Client) (string, string) {
	t.Helper()
	ctx := context.Background()
	access, secret := "ro"+strings.ToLower(rand.Text()[:10]), "ro-"+rand.Text()
	body := []byte("<Account><Access>" + access + "</Access><Secret>" + secret + "</Secret><Role>user</Role></Account>")
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, endpoint+"/create-user", bytes.NewReader(body))
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	require.NoError(t, v4.NewSigner().SignHTTP(ctx, root, req, hex.EncodeToString(sum[:]), "s3", "us-east-1", time.Now()))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "versitygw create-user")
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"read","Effect":"Allow","Principal":{"AWS":["` + access + `"]},` +
		`"Action":["s3:GetObject","s3:ListBucket","s3:GetBucketLocation"],"Resource":["arn:aws:s3:::` + bucket + `","arn:aws:s3:::` + bucket + `/*"]}]}`
	_, err = client.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(policy)})
	require.NoError(t, err)
	return access, secret
}

// importSource is a source's final backup of an app's database, with rows, in a
// versitygw bucket, and the migration data that reads it with a read-only key.
func importSource(t *testing.T) migration.AppData {
	t.Helper()
	ctx := context.Background()
	endpoint, root := startGateway(t)
	bucket := "backups-" + strings.ToLower(rand.Text()[:8])
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return root, nil })})
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)

	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	cfg := admin.Config()
	role, password := "src_"+strings.ToLower(rand.Text()[:10]), "pg-"+rand.Text()
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", pgx.Identifier{cfg.Database}.Sanitize(), role))
	require.NoError(t, err)
	db := backup.Database{Host: cfg.Host, Port: int(cfg.Port), Database: cfg.Database, User: role, Password: password, SSLMode: "disable"}
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", role, password, cfg.Host, cfg.Port, cfg.Database))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE feeds (id serial PRIMARY KEY, url text NOT NULL); INSERT INTO feeds (url) VALUES ('https://example.org/a.xml'), ('https://example.org/b.xml')`)
	require.NoError(t, err)

	target := backup.Target{Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Bucket: bucket, Path: "dbapp",
		AccessKeyID: root.AccessKeyID, SecretAccessKey: root.SecretAccessKey, RepositoryPassword: "repo-" + rand.Text()}
	snap, err := backup.Backup(ctx, target, &db, nil, map[string]string{"kind": "final"})
	require.NoError(t, err)
	access, secret := readOnlyKey(t, endpoint, bucket, root, client)
	return migration.AppData{Version: "1.0.0", RepositoryPassword: target.RepositoryPassword, Snapshot: snap.ID,
		S3: migration.S3{Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Bucket: bucket, Path: "dbapp", AccessKeyID: access, SecretAccessKey: secret}}
}

// newImportEngine is an engine with the real postgresql (on pgtest's server), embedded
// secret, local and openldap (its managed slapd) providers and the test app dbapp; builds are run by the test.
func newImportEngine(t *testing.T) (*Engine, *store.Store) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	lock := plugins.Lock{}
	for name, pkg := range map[string]string{"fedhost-app-dbapp": "./testdata/dbapp",
		"fedhost-resource-postgresql": "../../plugins/resources/postgresql", "fedhost-resource-embedded": "../../plugins/resources/embedded",
		"fedhost-resource-local": "../../plugins/resources/local", "fedhost-resource-openldap": "../../plugins/resources/openldap"} {
		bin := filepath.Join(dir, "plugins", name)
		goBuild(t, bin, pkg)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(filepath.Join(dir, "plugins")))
	dsn := pgtest.DSN(t)
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: filepath.Join(dir, "plugins"), DataDir: filepath.Join(dir, "data"), Logger: hclog.NewNullLogger(),
		Settings: func(desc sdk.Description) (json.RawMessage, bool) {
			switch desc.Name {
			case "postgresql":
				return json.RawMessage(fmt.Sprintf(`{"url": %q}`, dsn)), true
			case "local":
				// dbapp runs no node: the environment names an instance provider all the same.
				return json.RawMessage(fmt.Sprintf(`{"artifacts_dir": %q}`, t.TempDir())), true
			case "openldap":
				return json.RawMessage(`{"managed": true}`), true
			}
			return nil, true
		}})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	e := New(Options{Store: st, Plugins: m, Catalog: cat, Audit: audit.New(st, audit.Options{}), Environment: []config.Resource{
		{Type: contract.PostgreSQL, Provider: "postgresql"}, {Type: contract.Secret, Provider: "embedded"}, {Type: contract.Instance, Provider: "local"},
		{Type: contract.LDAP, Provider: "openldap"},
	}})
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	require.NoError(t, err)
	e.SetQueue(q)
	_, err = e.RecordRevision(ctx)
	require.NoError(t, err)
	return e, st
}

// runBuild runs a queued build as the queue would and returns its error and events.
func runBuild(t *testing.T, e *Engine, st *store.Store, id string) (string, error) {
	t.Helper()
	ctx := context.Background()
	err := e.Build(ctx, id, nil)
	state, reason := store.BuildSucceeded, ""
	if err != nil {
		state, reason = store.BuildFailed, err.Error()
	}
	require.NoError(t, st.SetBuildState(ctx, id, state, reason))
	evs, serr := st.BuildEvents(ctx, id)
	require.NoError(t, serr)
	var log strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&log, "%s %s: %s\n", ev.Level, ev.Step, ev.Message)
	}
	return log.String(), err
}

// An imported deployment's first build restores its app from the source's snapshot with
// the string's read-only key, deletes the import's pointers and confirms to the source;
// a restore that fails (a wrong repository password) fails the build and keeps the
// pointers, and the next build, the pointers mended, restores. A confirmation the source
// does not take is a warning, sent again by the next build.
func TestImportedDeploymentsFirstBuildRestores(t *testing.T) {
	ctx := context.Background()
	data := importSource(t)
	e, st := newImportEngine(t)

	var mu sync.Mutex
	var confirms []map[string]string
	refusals := 1
	source := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/migration/confirm" {
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body map[string]string
		_ = json.Unmarshal(raw, &body)
		confirms = append(confirms, body)
		if refusals > 0 {
			refusals--
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(source.Close)

	good := data
	data.RepositoryPassword = "not-the-repository-password"
	now := time.Now()
	p := migration.Payload{ID: "0123456789abcdef0123456789abcdef", CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
		Source:     migration.Source{URL: source.URL, ConfirmToken: "confirm-" + rand.Text()},
		Deployment: migration.Deployment{ID: "source-id", Name: "Acme", Namespace: "acme"}, CatalogRevision: "rev-at-source",
		Versions: map[string]string{"dbapp": "1.0.0"}, Config: json.RawMessage(`{"domain":"acme.example","apps":{"dbapp":{"enable":true}}}`),
		Apps: map[string]migration.AppData{"dbapp": data}, Domain: migration.Domain{Name: "acme.example"}}
	salt := []byte("salt0123")
	sum := sha1.Sum(append([]byte("old password of ada"), salt...))
	p.Directory = &migration.Directory{
		Users: []migration.User{{Name: "ada", DisplayName: "Ada L", Email: "ada@acme.example", PasswordHash: "{SSHA}" + base64.StdEncoding.EncodeToString(append(sum[:], salt...))},
			{Name: "bob", Disabled: true}},
		Groups: []migration.Group{{Name: "readers", Members: []string{"ada", "bob"}}, {Name: "staff", Members: []string{"ada"}}},
	}
	secrets := []string{p.Directory.Users[0].PasswordHash, data.S3.SecretAccessKey, data.RepositoryPassword, good.RepositoryPassword, p.Source.ConfirmToken}
	noSecrets := func(log string) {
		t.Helper()
		for _, s := range secrets {
			require.NotContains(t, log, s, "a build event shows a secret of the migration string")
		}
	}
	plan, err := e.Import(ctx, ImportRequest{Payload: p, Owner: "alice"})
	require.NoError(t, err)

	// The first build: the repository password does not open the repository.
	log, err := runBuild(t, e, st, plan.Build)
	require.Error(t, err, log)
	require.Contains(t, err.Error(), "restore of dbapp")
	require.Contains(t, log, "restoring dbapp from the source's snapshot "+data.Snapshot)
	noSecrets(log + err.Error())
	d, err := st.GetDeployment(ctx, plan.Deployment)
	require.NoError(t, err)
	require.Equal(t, StateFailed, d.State)
	refs := e.storedRefs(d)
	require.Contains(t, refs, importPointer, "a failed restore keeps the pointers")
	require.Empty(t, confirms, "the source is not told of a failed import")
	rows := func() []string {
		r := &run{e: e, d: d}
		require.NoError(t, r.load(ctx))
		db, err := r.database(ctx, "dbapp")
		require.NoError(t, err)
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", db.User, db.Password, db.Host, db.Port, db.Database))
		require.NoError(t, err)
		defer conn.Close(ctx)
		var urls []string
		rs, err := conn.Query(ctx, `SELECT url FROM feeds ORDER BY id`)
		if err != nil {
			return nil // no table: nothing restored
		}
		for rs.Next() {
			var u string
			require.NoError(t, rs.Scan(&u))
			urls = append(urls, u)
		}
		require.NoError(t, rs.Err())
		return urls
	}
	require.Empty(t, rows())

	// The pointers mended (the right password), the next build restores.
	mended, err := json.Marshal(Pending{ID: p.ID, SourceURL: p.Source.URL, ConfirmToken: p.Source.ConfirmToken,
		Apps: map[string]migration.AppData{"dbapp": good}, Directory: p.Directory, Domain: p.Domain})
	require.NoError(t, err)
	refs[importPointer], err = e.keepImport(ctx, d, importPointer, string(mended))
	require.NoError(t, err)
	pointersRef := refs[importPointer]
	raw, _ := json.Marshal(refs)
	require.NoError(t, st.UpdateDeployment(ctx, d.ID, map[string]any{"secret_refs": string(raw)}))
	b, err := e.Resume(ctx, d.ID)
	require.NoError(t, err)
	log, err = runBuild(t, e, st, b.ID)
	require.NoError(t, err, log)
	noSecrets(log)
	require.Equal(t, []string{"https://example.org/a.xml", "https://example.org/b.xml"}, rows(), "the source's rows are back")
	d, err = st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, StateActive, d.State)
	refs = e.storedRefs(d)
	require.NotContains(t, refs, importPointer, "the pointers are deleted once used")
	_, err = e.reveal(ctx, d.Namespace, importInstances[importPointer], pointersRef)
	require.Error(t, err, "the secret resource forgot the pointers")
	require.Contains(t, refs, importConfirmPointer, "the token is kept until the source takes the confirmation")
	require.Contains(t, log, "the next build tells it again")
	require.Contains(t, log, "2 users of the source made in the directory with their passwords, 0 there already")
	res, pw, err := e.Directory(ctx, d.ID)
	require.NoError(t, err)
	dir, err := directory.New(res, pw)
	require.NoError(t, err)
	users, err := dir.Users()
	require.NoError(t, err)
	require.Len(t, users, 2)
	require.Equal(t, directory.User{Name: "ada", DisplayName: "Ada L", Email: "ada@acme.example", Groups: []string{"readers", "staff"}}, users[0])
	require.Equal(t, directory.User{Name: "bob", DisplayName: "bob", Disabled: true, Groups: []string{"readers"}}, users[1])
	conn, err := ldap.DialURL(res.URL)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.Bind("uid=ada,"+res.UsersDN, "old password of ada"), "ada signs in with her old password")
	var again Pending
	require.NoError(t, json.Unmarshal(mended, &again))
	r := &run{e: e, d: d, imported: &again}
	require.NoError(t, r.load(ctx))
	require.NoError(t, r.importUsers(ctx), "users made before are left alone")

	// The next build confirms again; the source takes it and the token goes.
	b, err = e.Resume(ctx, d.ID)
	require.NoError(t, err)
	log, err = runBuild(t, e, st, b.ID)
	require.NoError(t, err, log)
	require.NotContains(t, log, "restoring", "a restored import is not restored again")
	require.Contains(t, log, "the source confirmed the import")
	require.NotContains(t, log, "users of the source", "the users are made once")
	d, err = st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.Empty(t, e.storedRefs(d))

	// A submit that raced the build stored the references it had read: the next build
	// forgets the deleted ones and restores nothing.
	require.NoError(t, st.UpdateDeployment(ctx, d.ID, map[string]any{"secret_refs": string(raw)}))
	b, err = e.Resume(ctx, d.ID)
	require.NoError(t, err)
	log, err = runBuild(t, e, st, b.ID)
	require.NoError(t, err, log)
	require.Contains(t, log, "the import's pointers were deleted by an earlier build")
	require.NotContains(t, log, "restoring")
	d, err = st.GetDeployment(ctx, d.ID)
	require.NoError(t, err)
	require.Empty(t, e.storedRefs(d))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, confirms, 2)
	for _, c := range confirms {
		require.Equal(t, map[string]string{"id": p.ID, "token": p.Source.ConfirmToken}, c)
	}
}
