package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestConformance(t *testing.T) {
	f := newFrontDoor(t)
	b := f.browser()
	// Every tenant's directory shares one bind password, as the kit hands every request
	// the same secrets.
	const bindPassword = "conformance-bind-password-0123456789"
	var mu sync.Mutex
	dirs := map[string]testDirectory{}
	t.Cleanup(func() {
		for _, d := range dirs {
			d.remove(t)
		}
	})
	request := func(tenant string) json.RawMessage {
		mu.Lock()
		d, ok := dirs[tenant]
		if !ok {
			d = newTestDirectory(t, tenant)
			c, err := testServer.Admin()
			if err == nil {
				err = c.Modify(modifyPassword(d.result.BindDN, bindPassword))
				c.Close()
			}
			if err != nil {
				t.Errorf("setting the bind password of %s: %v", tenant, err)
			}
			dirs[tenant] = d
		}
		mu.Unlock()
		dir := d.result
		spec, _ := json.Marshal(contract.OIDCRequest{
			Name: "Conformance", RedirectURIs: []string{"https://app." + tenant + ".test/callback"}, AllowedGroups: []string{"app-users"},
			Issuer: f.issuer(tenant), Directory: &dir,
		})
		return spec
	}
	resultOf := func(p conformance.Provisioned) (contract.OIDCResult, error) {
		var r contract.OIDCResult
		if err := json.Unmarshal(p.Result, &r); err != nil {
			return r, err
		}
		f.setUpstream(r.Upstream)
		return r, nil
	}
	conformance.Resource(t, pluginBinary, conformance.ResourceCase{
		Type:         "oidc",
		Settings:     json.RawMessage(`{}`),
		RequestFor:   request,
		Secrets:      map[string][]byte{"bind-password": []byte(bindPassword)},
		Invalid:      json.RawMessage(`{"name":"App","redirect_uris":["https://app.example.org/cb","javascript:alert(1)"]}`),
		InvalidField: "request/redirect_uris/1",
		// The credentials of from are its client's; they reach to's object when to's
		// issuer authenticates them.
		Access: func(_ context.Context, from, to conformance.Provisioned) error {
			fr, err := resultOf(from)
			if err != nil {
				return err
			}
			tr, err := resultOf(to)
			if err != nil {
				return err
			}
			return clientAuthenticates(b, tr.Issuer, fr.ClientID, string(from.Secrets[fr.ClientSecret.Secret]))
		},
		// The client exists when its issuer starts a sign-in for it.
		Exists: func(_ context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			u := fmt.Sprintf("%sauthorize?response_type=code&scope=openid&client_id=%s&redirect_uri=%s", r.Issuer, r.ClientID, "https://app."+p.Tenant+".test/callback")
			resp, err := b.Get(u)
			if err != nil {
				return false, err
			}
			resp.Body.Close()
			loc, _ := resp.Location()
			return resp.StatusCode == http.StatusFound && loc != nil && strings.HasPrefix(loc.Path, loginPath), nil
		},
	})
}
