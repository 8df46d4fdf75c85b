package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The log-in page lets its form end at the app's redirect URI, and at nothing else when
// that is not a plain http(s) URL.
func TestFormActionAllowsTheAppsOrigin(t *testing.T) {
	t.Parallel()
	for redirect, want := range map[string]string{
		"https://feeds.acme.test/oauth2/oidc/callback": "form-action 'self' https://feeds.acme.test",
		"https://feeds.acme.test:8443/cb?x=1":          "form-action 'self' https://feeds.acme.test:8443",
		"http://127.0.0.1:8080/cb":                     "form-action 'self' http://127.0.0.1:8080",
		"":                                             "form-action 'self'",
		"javascript:alert(1)":                          "form-action 'self'",
		"https://feeds.acme.test;script-src%20*/cb":    "form-action 'self'",
		"https://a.test' 'unsafe-inline/cb":            "form-action 'self'",
		"https://xn--bcher-kva.example/cb":             "form-action 'self' https://xn--bcher-kva.example",
		"https://bücher.example/cb":                    "form-action 'self'",
	} {
		require.Equal(t, want, formAction(redirect), redirect)
	}
}
