package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

// bucketExists asks the managed versitygw, with its root credentials, for a bucket.
func bucketExists(t *testing.T, h *host, bucket string) bool {
	dir := filepath.Join(h.dataDir, "plugins", "versitygw", "versitygw")
	var root struct {
		Access string `json:"access"`
		Secret string `json:"secret"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "root.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &root))
	port, err := os.ReadFile(filepath.Join(dir, "port"))
	require.NoError(t, err)
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:" + strings.TrimSpace(string(port))),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: root.Access, SecretAccessKey: root.Secret}, nil
		}),
	})
	_, err = client.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	return err == nil
}
