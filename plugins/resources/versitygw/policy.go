package main

import (
	"encoding/json"
	"sort"
)

// A key reaches a bucket only through the bucket's policy, whose principals are access
// key ids. versitygw evaluates a bucket policy instead of the bucket ACL once the bucket
// has one (auth/access-control.go), so the policy says exactly who may do what.

// actions are the S3 actions of each grant.
var actions = map[string][]string{
	"read": {"s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"},
	"write": {
		"s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation",
		"s3:PutObject", "s3:DeleteObject",
		"s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads",
	},
	"owner": {"s3:*"},
}

// managedActions stay with the provider: a key of grant owner may do anything else with
// the bucket, but not rewrite who reaches it, which the next provision would undo anyway.
var managedActions = []string{"s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketAcl"}

// policyIDPrefix marks the statements the provider writes; their Sid carries the grant.
const policyIDPrefix = "fedhost-"

type policyDoc struct {
	Version   string      `json:"Version"`
	Statement []statement `json:"Statement"`
}

type statement struct {
	Sid       string    `json:"Sid"`
	Effect    string    `json:"Effect"`
	Principal principal `json:"Principal"`
	Action    []string  `json:"Action"`
	Resource  []string  `json:"Resource"`
}

// principal is "*" or {"AWS": [access key ids]}.
type principal struct {
	Public bool
	AWS    []string
}

func (p principal) MarshalJSON() ([]byte, error) {
	if p.Public {
		return json.Marshal("*")
	}
	return json.Marshal(map[string][]string{"AWS": p.AWS})
}

func (p *principal) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		p.Public = s == "*"
		if !p.Public {
			p.AWS = []string{s}
		}
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	raw, ok := m["AWS"]
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		p.AWS = []string{one}
		return nil
	}
	return json.Unmarshal(raw, &p.AWS)
}

// bucketPolicy builds the policy of a bucket: one statement per grant level with the keys
// that have it, and public GetObject for public_read or website. It returns nil when
// nobody but the owner user and the admins may reach the bucket.
func bucketPolicy(bucket string, grants map[string]string, public bool) []byte {
	byGrant := map[string][]string{}
	for user, grant := range grants {
		byGrant[grant] = append(byGrant[grant], user)
	}
	bucketArn, objectsArn := "arn:aws:s3:::"+bucket, "arn:aws:s3:::"+bucket+"/*"
	doc := policyDoc{Version: "2012-10-17"}
	for _, grant := range []string{"read", "write", "owner"} {
		users := byGrant[grant]
		if len(users) == 0 {
			continue
		}
		sort.Strings(users)
		doc.Statement = append(doc.Statement, statement{
			Sid: policyIDPrefix + grant, Effect: "Allow", Principal: principal{AWS: users},
			Action: actions[grant], Resource: []string{bucketArn, objectsArn},
		})
		if grant == "owner" {
			doc.Statement = append(doc.Statement, statement{
				Sid: policyIDPrefix + "managed", Effect: "Deny", Principal: principal{AWS: users},
				Action: managedActions, Resource: []string{bucketArn},
			})
		}
	}
	if public {
		doc.Statement = append(doc.Statement, statement{
			Sid: policyIDPrefix + "public-read", Effect: "Allow", Principal: principal{Public: true},
			Action: []string{"s3:GetObject"}, Resource: []string{objectsArn},
		})
	}
	if len(doc.Statement) == 0 {
		return nil
	}
	b, _ := json.Marshal(doc)
	return b
}

// policyPrincipals returns the access key ids a policy names.
func policyPrincipals(raw []byte) []string {
	var doc policyDoc
	if json.Unmarshal(raw, &doc) != nil {
		return nil
	}
	var out []string
	for _, s := range doc.Statement {
		out = append(out, s.Principal.AWS...)
	}
	return out
}

// samePolicy reports whether two policy documents say the same, whatever their layout.
func samePolicy(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
