package main

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRouteServesHTTPSOverHTTP2(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	hosts := []string{"feeds.acme.test", "www.acme.test"}
	res, err := f.provision(t, "acme", "miniflux-route", routeSpec(t, hosts, up.Listener.Addr().String(), ca.issue(t, hosts...)), ca.keyPEM)
	require.NoError(t, err)
	require.Equal(t, []string{f.httpsURL(hosts[0], "/"), f.httpsURL(hosts[1], "/")}, res.URLs)

	c := f.client(ca)
	for _, h := range hosts {
		resp, err := c.Get(f.httpsURL(h, "/entries?x=1"))
		require.NoError(t, err)
		body := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Equal(t, 2, resp.ProtoMajor, "HTTP/2 through the front door")
		require.Equal(t, "feeds "+h, body, "the upstream's answer, with the host asked for")
		require.NotEmpty(t, resp.TLS.VerifiedChains, "the chain verifies against the test CA")
		require.Equal(t, hosts, resp.TLS.PeerCertificates[0].DNSNames, "the route's own certificate")
	}

	// Plain HTTP is redirected to HTTPS, on the HTTPS port.
	resp, err := c.Get(f.httpURL(hosts[0], "/entries?x=1"))
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusPermanentRedirect, resp.StatusCode)
	require.Equal(t, f.httpsURL(hosts[0], "/entries?x=1"), resp.Header.Get("Location"))

	// A name no route serves gets no certificate at all.
	_, err = c.Get(f.httpsURL("other.acme.test", "/"))
	require.Error(t, err)

	// A request for one host on a connection opened for another is refused.
	req, err := http.NewRequest(http.MethodGet, f.httpsURL(hosts[0], "/"), nil)
	require.NoError(t, err)
	req.Host = "elsewhere.test"
	resp, err = c.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	_, err := bufio.NewReader(resp.Body).WriteTo(&b)
	require.NoError(t, err)
	return b.String()
}
