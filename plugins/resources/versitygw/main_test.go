package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/child"
	"github.com/fedhost/fedhost/sdk/contract"
)

// The tests run against a real versitygw v1.8.0 with the posix backend, built from the
// Go tool of the root module and started once for the test binary on a free loopback
// port in a temp dir.
var (
	pluginBin string
	vgwBin    string
	shared    *testServer
)

// testServer is a versitygw the tests started, with its root credentials.
type testServer struct {
	endpoint string
	root     aws.Credentials
	iamDir   string
	cmd      *exec.Cmd
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedhost-versitygw-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		pluginBin = filepath.Join(dir, "fedhost-resource-versitygw")
		vgwBin = filepath.Join(dir, "versitygw")
		for _, b := range [][]string{
			{"-o", pluginBin, "."},
			// The Go tool of the root module (go.mod: tool github.com/versity/versitygw/cmd/versitygw).
			{"-o", vgwBin, "github.com/versity/versitygw/cmd/versitygw"},
		} {
			if out, err := exec.Command("go", append([]string{"build"}, b...)...).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "go build %v: %v\n%s", b, err, out)
				return 1
			}
		}
		shared, err = startTestServer(filepath.Join(dir, "shared"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer shared.stop()
		return m.Run()
	}()
	os.Exit(code)
}

func startTestServer(dir string) (*testServer, error) {
	for _, sub := range []string{"data", "iam"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	port, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	s := &testServer{
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		root:     aws.Credentials{AccessKeyID: "testroot", SecretAccessKey: "root-" + newSecret()},
		iamDir:   filepath.Join(dir, "iam"),
	}
	logFile, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(vgwBin, "--port", "127.0.0.1:"+strconv.Itoa(port), "--iam-dir", s.iamDir, "--health", "/health", "posix", filepath.Join(dir, "data"))
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.root.AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+s.root.SecretAccessKey)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting versitygw: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("versitygw did not become healthy on %s: see %s", s.endpoint, filepath.Join(dir, "versitygw.log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *testServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *testServer) settings() json.RawMessage {
	b, _ := json.Marshal(map[string]any{"endpoint": s.endpoint, "access_key": s.root.AccessKeyID, "secret_key": s.root.SecretAccessKey})
	return b
}

// admin returns an admin API client of a gateway with root credentials.
func adminOf(endpoint string, root aws.Credentials) *admin {
	return &admin{endpoint: endpoint, region: defaultRegion, creds: root, http: http.DefaultClient}
}

func (s *testServer) admin() *admin { return adminOf(s.endpoint, s.root) }

// s3Client returns an S3 client of endpoint with the given credentials.
func s3Client(endpoint, access, secret string) *s3.Client {
	return newS3Client(endpoint, defaultRegion, aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, http.DefaultClient)
}

// newProvider returns a provider configured on the shared test server.
func newProvider(t testing.TB) *provider {
	t.Helper()
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), shared.settings()))
	return p
}

// result parses the Data of a provision.
func result(t testing.TB, data json.RawMessage) contract.S3Result {
	t.Helper()
	var r contract.S3Result
	require.NoError(t, json.Unmarshal(data, &r))
	return r
}

// keyClient returns an S3 client with the credentials of key name of a result.
func keyClient(r contract.S3Result, secrets map[string][]byte, name string) *s3.Client {
	k := r.Keys[name]
	return s3Client(r.Endpoint, k.AccessKeyID, string(secrets[k.SecretAccessKey.Secret]))
}

func putObject(ctx context.Context, c *s3.Client, bucket, key, body string) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(body)})
	return err
}

func getObject(ctx context.Context, c *s3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

// uniqueTenant returns a tenant name no other test uses.
func uniqueTenant(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

// noSecretIn fails when err's message contains secret.
func noSecretIn(t *testing.T, err error, secret string) {
	t.Helper()
	if err != nil && bytes.Contains([]byte(err.Error()), []byte(secret)) {
		t.Errorf("an error shows the root secret: %v", err)
	}
}
