package deploy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
	"github.com/fedhost/fedhost/sdk/contract"
)

func frontDoorEngine(types ...string) *Engine {
	var env []config.Resource
	for _, t := range types {
		env = append(env, config.Resource{Type: t, Provider: "p-" + t})
	}
	return New(Options{Environment: env, FrontDoor: FrontDoor{Addresses: []string{"192.0.2.10", "2001:db8::10"}, HTTPSPort: 8443, HTTPPort: 80}})
}

// An app's URL is https with a tls provider, http without; a port other than the
// scheme's own is in it.
func TestPublicURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://feeds.acme.test:8443/", frontDoorEngine(contract.TLS, contract.Route).publicURL("feeds.acme.test"))
	require.Equal(t, "http://feeds.acme.test/", frontDoorEngine(contract.Route).publicURL("feeds.acme.test"))
	e := frontDoorEngine(contract.TLS, contract.Route)
	e.opts.FrontDoor.HTTPSPort = 443
	require.Equal(t, "https://feeds.acme.test/", e.publicURL("feeds.acme.test"))
}

// Each app host name gets an A record to each IPv4 address of the front door and an AAAA
// record to each IPv6 one, relative to the zone; a .localhost domain needs none.
func TestDNSRecords(t *testing.T) {
	t.Parallel()
	e := frontDoorEngine(contract.DNS, contract.Route)
	hosts := map[string]string{"miniflux": "feeds.acme.test", "hello": "www.eu.acme.test"}
	require.Equal(t, []contract.DNSRecord{
		{Name: "www.eu", Type: "A", Value: "192.0.2.10", TTL: 300},
		{Name: "www.eu", Type: "AAAA", Value: "2001:db8::10", TTL: 300},
		{Name: "feeds", Type: "A", Value: "192.0.2.10", TTL: 300},
		{Name: "feeds", Type: "AAAA", Value: "2001:db8::10", TTL: 300},
	}, e.DNSRecords("acme.test", hosts))
	require.Nil(t, e.DNSRecords("acme.localhost", map[string]string{"miniflux": "feeds.acme.localhost"}))
}

// The routed port's ${url:NAME} becomes the app's URL in every node of the app, inside
// JSON strings; other ports' placeholders are left to the instance provider.
func TestRouteURLPutsTheAppURLInItsNodes(t *testing.T) {
	t.Parallel()
	web, _ := json.Marshal(contract.InstanceRequest{Artifact: contract.Artifact{Binary: "x"},
		Env:   map[string]string{"BASE_URL": "${url:http}", "CALLBACK": "${url:http}oauth/callback", "METRICS": "${url:metrics}"},
		Ports: []contract.Port{{Name: "metrics", Protocol: "tcp"}, {Name: "http", Protocol: "http"}}})
	worker, _ := json.Marshal(contract.InstanceRequest{Artifact: contract.Artifact{Binary: "x"}, Args: []string{"--public=${url:http}"}})
	nodes := []step{{Name: "a-worker", Spec: worker}, {Name: "a-web", Spec: web}}
	ap := &appPlan{URL: "https://feeds.acme.test:8443/"}
	routeURL(ap, nodes)
	require.Equal(t, "a-web", ap.routeNode)
	require.Equal(t, "http", ap.routePort)
	var got contract.InstanceRequest
	require.NoError(t, json.Unmarshal(nodes[1].Spec, &got))
	require.Equal(t, "https://feeds.acme.test:8443/", got.Env["BASE_URL"])
	require.Equal(t, "https://feeds.acme.test:8443/oauth/callback", got.Env["CALLBACK"])
	require.Equal(t, "${url:metrics}", got.Env["METRICS"])
	require.NoError(t, json.Unmarshal(nodes[0].Spec, &got))
	require.Equal(t, []string{"--public=https://feeds.acme.test:8443/"}, got.Args)

	// Without a front door URL nothing changes.
	plain := []step{{Name: "a-web", Spec: web}}
	ap = &appPlan{}
	routeURL(ap, plain)
	require.Empty(t, ap.routeNode)
	require.JSONEq(t, string(web), string(plain[0].Spec))
}

// A certificate's step names the zone's update key, and a route's the certificate's key,
// so that the host reveals them to the provider and nothing else.
func TestSpecRefs(t *testing.T) {
	t.Parallel()
	tls, _ := json.Marshal(contract.TLSRequest{Domains: []string{"feeds.acme.test"}, Challenge: "dns-01",
		DNS: &contract.DNSUpdate{Server: "192.0.2.53:53", KeyName: "k.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "acme/domain-dns-creds/tsig"}}})
	route, _ := json.Marshal(contract.RouteRequest{Hosts: []string{"feeds.acme.test"}, Upstream: "127.0.0.1:1",
		TLS: &contract.RouteTLS{Certificate: "PEM", Key: contract.SecretRef{Secret: "acme/miniflux-tls-creds/key"}}})
	require.Equal(t, []string{"acme/domain-dns-creds/tsig"}, specRefs(step{Type: contract.TLS, Spec: tls}))
	require.Equal(t, []string{"acme/miniflux-tls-creds/key"}, specRefs(step{Type: contract.Route, Spec: route}))
	plainRoute, _ := json.Marshal(contract.RouteRequest{Hosts: []string{"feeds.acme.test"}, Upstream: "127.0.0.1:1"})
	require.Empty(t, specRefs(step{Type: contract.Route, Spec: plainRoute}))
	require.Empty(t, specRefs(step{Type: contract.PostgreSQL, Spec: json.RawMessage(`{}`)}))
}

// An app's redirect address names its routed port's URL, which the host puts in.
func TestURLInRequests(t *testing.T) {
	t.Parallel()
	sso, _ := json.Marshal(contract.OIDCRequest{Name: "Miniflux", RedirectURIs: []string{"${url:http}oauth2/oidc/callback"}})
	db := json.RawMessage(`{"note":"${url:http}"}`)
	ap := &appPlan{URL: "https://feeds.acme.test:8443/", routePort: "http",
		Steps: []step{{Name: "m-sso", Type: contract.OIDC, Spec: sso}, {Name: "m-db", Type: contract.PostgreSQL, Spec: db}}}
	urlInRequests(ap)
	var got contract.OIDCRequest
	require.NoError(t, json.Unmarshal(ap.Steps[0].Spec, &got))
	require.Equal(t, []string{"https://feeds.acme.test:8443/oauth2/oidc/callback"}, got.RedirectURIs)
	require.JSONEq(t, string(db), string(ap.Steps[1].Spec), "only oidc requests")
}
