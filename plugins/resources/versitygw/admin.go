package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedhost/fedhost/sdk"
)

// The versitygw admin API (v1.8.0, s3api/router.go and s3api/controllers/admin.go): every
// call is a PATCH signed with AWS SigV4 (service "s3") by an account of role admin, here
// the root account. Bodies and answers are XML.

// Roles of versitygw accounts. A user of role user can create no bucket; it reaches a
// bucket it owns (through the bucket ACL) or one whose bucket policy names it.
const roleUser = "user"

// account is auth.Account of versitygw, as the admin API reads and writes it.
type account struct {
	Access    string `xml:"Access"`
	Secret    string `xml:"Secret"`
	Role      string `xml:"Role"`
	UserID    int    `xml:"UserID"`
	GroupID   int    `xml:"GroupID"`
	ProjectID int    `xml:"ProjectID"`
}

// String keeps the secret out of any log or error that prints an account.
func (a account) String() string { return fmt.Sprintf("account %s (role %s)", a.Access, a.Role) }

// bucketOwner is one entry of list-buckets.
type bucketOwner struct {
	Name  string `xml:"Name"`
	Owner string `xml:"Owner"`
}

// admin calls the admin API of one gateway with the root credentials.
type admin struct {
	endpoint string // scheme://host:port, no trailing slash
	region   string
	creds    aws.Credentials
	http     *http.Client
}

// apiError is an error answer of the gateway: <Error><Code/><Message/></Error>.
type apiError struct {
	Status  int
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("versitygw answered %d %s: %s", e.Status, e.Code, e.Message)
}

func (a *admin) call(ctx context.Context, path string, query url.Values, header http.Header, body []byte, out any) error {
	u := a.endpoint + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("admin request %s: %w", path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if err := v4.NewSigner().SignHTTP(ctx, a.creds, req, payload, "s3", a.region, time.Now()); err != nil {
		return fmt.Errorf("signing the admin request %s: %w", path, err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return unreachable(a.endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return unreachable(a.endpoint, err)
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode}
		if xml.Unmarshal(raw, e) != nil || e.Code == "" {
			e.Code = http.StatusText(resp.StatusCode)
			e.Message = strings.TrimSpace(string(raw))
		}
		return fmt.Errorf("admin %s: %w", path, e)
	}
	if out != nil {
		if err := xml.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("admin %s: reading the answer: %w", path, err)
		}
	}
	return nil
}

// unreachable wraps a transport error; it names the endpoint, never a credential.
func unreachable(endpoint string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return sdk.Unavailable("versitygw at %s cannot be reached: %v", endpoint, err)
}

func (a *admin) listUsers(ctx context.Context) (map[string]account, error) {
	var out struct {
		Accounts []account `xml:"Accounts"`
	}
	if err := a.call(ctx, "/list-users", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	users := make(map[string]account, len(out.Accounts))
	for _, acc := range out.Accounts {
		users[acc.Access] = acc
	}
	return users, nil
}

func (a *admin) createUser(ctx context.Context, access, secret, role string) error {
	body, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"Account"`
		account
	}{account: account{Access: access, Secret: secret, Role: role}})
	if err != nil {
		return err
	}
	return a.call(ctx, "/create-user", nil, nil, body, nil)
}

// setSecret changes the secret of an existing user.
func (a *admin) setSecret(ctx context.Context, access, secret string) error {
	body, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"MutableProps"`
		Secret  string   `xml:"Secret"`
	}{Secret: secret})
	if err != nil {
		return err
	}
	return a.call(ctx, "/update-user", url.Values{"access": {access}}, nil, body, nil)
}

func (a *admin) deleteUser(ctx context.Context, access string) error {
	return a.call(ctx, "/delete-user", url.Values{"access": {access}}, nil, nil, nil)
}

// listBuckets returns every bucket of the gateway with the access key of its owner.
func (a *admin) listBuckets(ctx context.Context) (map[string]string, error) {
	var out struct {
		Buckets []bucketOwner `xml:"Buckets"`
	}
	if err := a.call(ctx, "/list-buckets", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	owners := make(map[string]string, len(out.Buckets))
	for _, b := range out.Buckets {
		owners[b.Name] = b.Owner
	}
	return owners, nil
}

// createBucket creates a bucket owned by the user owner from the start.
func (a *admin) createBucket(ctx context.Context, bucket, owner string) error {
	return a.call(ctx, "/"+url.PathEscape(bucket)+"/create", nil, http.Header{"X-Vgw-Owner": {owner}}, nil, nil)
}

// classify turns a gateway error into an sdk error where one fits.
func classify(err error, what string) error {
	var e *apiError
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Status == http.StatusForbidden || e.Code == "InvalidAccessKeyId" || e.Code == "SignatureDoesNotMatch":
		return sdk.Invalid("settings/access_key", "versitygw refused the admin credentials while %s (%s): check access_key and secret_key of an admin account", what, e.Code)
	case e.Status >= 500:
		return sdk.Unavailable("versitygw failed while %s: %v", what, e)
	}
	return fmt.Errorf("%s: %w", what, err)
}
