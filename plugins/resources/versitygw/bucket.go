package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/fedhost/fedhost/sdk/contract"
)

// indexDocument is the index document of a bucket served as a website.
const indexDocument = "index.html"

// buckets does the S3 calls on buckets with the root credentials: policies, CORS, website
// configuration, emptying and deleting.
type buckets struct {
	s3       *s3.Client
	endpoint string
}

func newS3Client(endpoint, region string, creds aws.Credentials, hc *http.Client) *s3.Client {
	return s3.New(s3.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
		HTTPClient:                 hc,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// errorCode returns the S3 error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// s3Failed wraps an S3 error; a transport failure is sdk.Unavailable.
func (b *buckets) s3Failed(err error, format string, args ...any) error {
	if errorCode(err) == "" && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return unreachable(b.endpoint, err)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

func (b *buckets) policy(ctx context.Context, bucket string) ([]byte, error) {
	out, err := b.s3.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: &bucket})
	switch {
	case errorCode(err) == "NoSuchBucketPolicy":
		return nil, nil
	case err != nil:
		return nil, b.s3Failed(err, "reading the policy of bucket %s", bucket)
	}
	return []byte(aws.ToString(out.Policy)), nil
}

// setPolicy makes the bucket's policy want (none when want is nil), writing only a change.
func (b *buckets) setPolicy(ctx context.Context, bucket string, have, want []byte) error {
	switch {
	case want == nil && have == nil, want != nil && have != nil && samePolicy(have, want):
		return nil
	case want == nil:
		if _, err := b.s3.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: &bucket}); err != nil && errorCode(err) != "NoSuchBucketPolicy" {
			return b.s3Failed(err, "removing the policy of bucket %s", bucket)
		}
		return nil
	}
	if _, err := b.s3.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &bucket, Policy: aws.String(string(want))}); err != nil {
		return b.s3Failed(err, "writing the policy of bucket %s", bucket)
	}
	return nil
}

// corsRules turns the request's CORS rules into S3's.
func corsRules(rules []contract.S3CORS) []types.CORSRule {
	var out []types.CORSRule
	for _, r := range rules {
		rule := types.CORSRule{AllowedOrigins: r.AllowedOrigins, AllowedMethods: r.AllowedMethods, AllowedHeaders: r.AllowedHeaders}
		if r.MaxAgeSeconds > 0 {
			rule.MaxAgeSeconds = aws.Int32(int32(r.MaxAgeSeconds))
		}
		out = append(out, rule)
	}
	return out
}

// sameCORS compares the fields the provider sets.
func sameCORS(a, b []types.CORSRule) bool {
	type rule struct {
		Origins, Methods, Headers []string
		MaxAge                    int32
	}
	norm := func(rs []types.CORSRule) []rule {
		out := make([]rule, 0, len(rs))
		for _, r := range rs {
			out = append(out, rule{r.AllowedOrigins, r.AllowedMethods, r.AllowedHeaders, aws.ToInt32(r.MaxAgeSeconds)})
		}
		for i := range out {
			if len(out[i].Headers) == 0 {
				out[i].Headers = nil
			}
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// setCORS makes the bucket's CORS configuration the request's, writing only a change.
func (b *buckets) setCORS(ctx context.Context, bucket string, rules []contract.S3CORS) error {
	want := corsRules(rules)
	out, err := b.s3.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: &bucket})
	var have []types.CORSRule
	switch {
	case errorCode(err) == "NoSuchCORSConfiguration":
	case err != nil:
		return b.s3Failed(err, "reading the CORS configuration of bucket %s", bucket)
	default:
		have = out.CORSRules
	}
	switch {
	case sameCORS(have, want):
		return nil
	case len(want) == 0:
		if _, err := b.s3.DeleteBucketCors(ctx, &s3.DeleteBucketCorsInput{Bucket: &bucket}); err != nil {
			return b.s3Failed(err, "removing the CORS configuration of bucket %s", bucket)
		}
		return nil
	}
	if _, err := b.s3.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: &bucket, CORSConfiguration: &types.CORSConfiguration{CORSRules: want}}); err != nil {
		return b.s3Failed(err, "writing the CORS configuration of bucket %s", bucket)
	}
	return nil
}

// setWebsite configures (or removes) static website hosting with index.html as the index
// document, writing only a change.
func (b *buckets) setWebsite(ctx context.Context, bucket string, website bool) error {
	out, err := b.s3.GetBucketWebsite(ctx, &s3.GetBucketWebsiteInput{Bucket: &bucket})
	has := err == nil
	if err != nil && errorCode(err) != "NoSuchWebsiteConfiguration" {
		return b.s3Failed(err, "reading the website configuration of bucket %s", bucket)
	}
	switch {
	case !website && !has:
		return nil
	case !website:
		if _, err := b.s3.DeleteBucketWebsite(ctx, &s3.DeleteBucketWebsiteInput{Bucket: &bucket}); err != nil {
			return b.s3Failed(err, "removing the website configuration of bucket %s", bucket)
		}
		return nil
	case has && out.IndexDocument != nil && aws.ToString(out.IndexDocument.Suffix) == indexDocument:
		return nil
	}
	_, err = b.s3.PutBucketWebsite(ctx, &s3.PutBucketWebsiteInput{Bucket: &bucket, WebsiteConfiguration: &types.WebsiteConfiguration{
		IndexDocument: &types.IndexDocument{Suffix: aws.String(indexDocument)},
	}})
	if err != nil {
		return b.s3Failed(err, "writing the website configuration of bucket %s", bucket)
	}
	return nil
}

// remove deletes every object, object version and unfinished upload of a bucket, then
// the bucket. A bucket already gone is not an error.
func (b *buckets) remove(ctx context.Context, bucket string) error {
	err := b.empty(ctx, bucket)
	if err == nil {
		_, err = b.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
	}
	if err != nil && errorCode(err) != "NoSuchBucket" {
		return b.s3Failed(err, "deleting bucket %s", bucket)
	}
	return nil
}

func (b *buckets) empty(ctx context.Context, bucket string) error {
	uploads := s3.NewListMultipartUploadsPaginator(b.s3, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	for uploads.HasMorePages() {
		page, err := uploads.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if _, err := b.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: u.Key, UploadId: u.UploadId}); err != nil && errorCode(err) != "NoSuchUpload" {
				return err
			}
		}
	}
	versioning, err := b.s3.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &bucket})
	if err != nil {
		return err
	}
	if versioning.Status != "" {
		return b.emptyVersions(ctx, bucket)
	}
	objects := s3.NewListObjectsV2Paginator(b.s3, &s3.ListObjectsV2Input{Bucket: &bucket})
	for objects.HasMorePages() {
		page, err := objects.NextPage(ctx)
		if err != nil {
			return err
		}
		var ids []types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if err := b.deleteObjects(ctx, bucket, ids); err != nil {
			return err
		}
	}
	return nil
}

func (b *buckets) emptyVersions(ctx context.Context, bucket string) error {
	versions := s3.NewListObjectVersionsPaginator(b.s3, &s3.ListObjectVersionsInput{Bucket: &bucket})
	for versions.HasMorePages() {
		page, err := versions.NextPage(ctx)
		if err != nil {
			return err
		}
		var ids []types.ObjectIdentifier
		for _, v := range page.Versions {
			ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			ids = append(ids, types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if err := b.deleteObjects(ctx, bucket, ids); err != nil {
			return err
		}
	}
	return nil
}

func (b *buckets) deleteObjects(ctx context.Context, bucket string, ids []types.ObjectIdentifier) error {
	if len(ids) == 0 {
		return nil
	}
	out, err := b.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
	if err != nil {
		return err
	}
	if len(out.Errors) > 0 {
		e := out.Errors[0]
		return fmt.Errorf("deleting object %q of bucket %s: %s %s", aws.ToString(e.Key), bucket, aws.ToString(e.Code), aws.ToString(e.Message))
	}
	return nil
}
