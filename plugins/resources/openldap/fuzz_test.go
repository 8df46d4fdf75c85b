package main

import (
	"encoding/json"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/fedhost/fedhost/sdk"
)

// FuzzParseRequest checks that a request is either refused as invalid or gives groups
// whose DNs are each one RDN under the deployment's groups entry.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"groups":["editors","readers"]}`))
	f.Add([]byte(`{"groups":["cn=x,dc=y"]}`))
	f.Add([]byte(`{}`))
	s := subtree{tenant: "acme", instance: "dir", base: "dc=fedhost,dc=test"}
	groups, err := ldap.ParseDN(s.groups())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		r, err := parseRequest(json.RawMessage(spec))
		if err != nil {
			if sdk.CodeOf(err) != sdk.CodeInvalid || sdk.FieldOf(err) == "" {
				t.Fatalf("refused without naming a field: %v", err)
			}
			return
		}
		for _, g := range r.Groups {
			dn, err := ldap.ParseDN(s.groupDN(g))
			if err != nil || len(dn.RDNs) != len(groups.RDNs)+1 || dn.RDNs[0].Attributes[0].Value != g {
				t.Fatalf("group %q gives DN %q (%v)", g, s.groupDN(g), err)
			}
		}
	})
}
