package ldaptest

import (
	"testing"

	"github.com/go-ldap/ldap/v3"
)

// TestStart proves the server answers its root DN and refuses anonymous reads of the base.
func TestStart(t *testing.T) {
	s, stop, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := s.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Search(ldap.NewSearchRequest(s.BaseDN, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", nil, nil))
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("admin search of %s: %v, %d entries", s.BaseDN, err, len(res.Entries))
	}
	anon, err := ldap.DialURL(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	res, err = anon.Search(ldap.NewSearchRequest(s.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", nil, nil))
	if err == nil && len(res.Entries) > 0 {
		t.Fatalf("an anonymous search found %d entries", len(res.Entries))
	}
}
