package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

// readOnlyKey makes a versitygw user that the bucket's policy lets only read, as a
// source's export mints for a migration string, and returns the target with its key.
func readOnlyKey(t testing.TB, target Target, root aws.Credentials) Target {
	t.Helper()
	ctx := context.Background()
	access, secret := "ro"+strings.ToLower(rand.Text()[:10]), "ro-"+rand.Text()
	body := []byte("<Account><Access>" + access + "</Access><Secret>" + secret + "</Secret><Role>user</Role></Account>")
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, target.Endpoint+"/create-user", bytes.NewReader(body))
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	require.NoError(t, v4.NewSigner().SignHTTP(ctx, root, req, hex.EncodeToString(sum[:]), "s3", "us-east-1", time.Now()))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "versitygw create-user")
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(target.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return root, nil })})
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"read","Effect":"Allow","Principal":{"AWS":["` + access + `"]},` +
		`"Action":["s3:GetObject","s3:ListBucket","s3:GetBucketLocation"],"Resource":["arn:aws:s3:::` + target.Bucket + `","arn:aws:s3:::` + target.Bucket + `/*"]}]}`
	_, err = client.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(target.Bucket), Policy: aws.String(policy)})
	require.NoError(t, err)
	target.AccessKeyID, target.SecretAccessKey = access, secret
	return target
}

// A key that may only read the bucket restores a backup with NoLock; without it restic
// cannot write its lock and the restore fails, the database untouched.
func TestRestoreWithAReadOnlyKey(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.feeds(t)
	snap, err := Backup(ctx, b.target, &b.db, nil, map[string]string{"kind": "final"})
	require.NoError(t, err)
	ro := readOnlyKey(t, b.target, aws.Credentials{AccessKeyID: b.target.AccessKeyID, SecretAccessKey: b.target.SecretAccessKey})
	_, err = b.conn.Exec(ctx, "DELETE FROM feeds")
	require.NoError(t, err)

	err = Restore(ctx, ro, snap.ID, &b.db, "")
	require.Error(t, err, "restic locks the repository unless told not to")
	noSecretIn(t, err, ro.SecretAccessKey, ro.RepositoryPassword, b.db.Password)
	require.Empty(t, b.feedURLs(t))

	ro.NoLock = true
	require.NoError(t, Restore(ctx, ro, snap.ID, &b.db, ""))
	require.Equal(t, []string{"https://example.org/a.xml", "https://example.org/b.xml"}, b.feedURLs(t))
	_, err = Backup(ctx, ro, &b.db, nil, nil)
	require.Error(t, err, "the key only reads")
}

// The restore step of an import: a database of 10,000 rows restored from the source's
// repository with a read-only key (NoLock), as the target's first build does.
func BenchmarkRestoreWithAReadOnlyKey10000Rows(b *testing.B) {
	bb := setup(b)
	ctx := context.Background()
	_, err := bb.conn.Exec(ctx, `CREATE TABLE entries (id int PRIMARY KEY, title text NOT NULL, content text NOT NULL);
		INSERT INTO entries SELECT i, 'entry ' || i, repeat('content of an entry ', 20) FROM generate_series(1, 10000) i`)
	require.NoError(b, err)
	start := time.Now()
	snap, err := Backup(ctx, bb.target, &bb.db, nil, map[string]string{"kind": "final"})
	require.NoError(b, err)
	backupTook := time.Since(start)
	ro := readOnlyKey(b, bb.target, aws.Credentials{AccessKeyID: bb.target.AccessKeyID, SecretAccessKey: bb.target.SecretAccessKey})
	ro.NoLock = true
	b.ResetTimer()
	for range b.N {
		require.NoError(b, Restore(ctx, ro, snap.ID, &bb.db, ""))
	}
	b.StopTimer()
	// After the loop: ResetTimer drops the metrics reported before it.
	b.ReportMetric(float64(backupTook.Milliseconds()), "final-backup-ms")
	var n int
	require.NoError(b, bb.conn.QueryRow(ctx, "SELECT count(*) FROM entries").Scan(&n))
	require.Equal(b, 10000, n)
}
