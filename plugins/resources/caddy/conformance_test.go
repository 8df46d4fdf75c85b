package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

// TestConformance runs the resource kit: each tenant's route is its own host with its own
// certificate, all to one upstream that answers with the host it was asked for. A tenant
// "reaches" another's object when a connection opened for its host can be used for the
// other's: strict SNI refuses that (421), so only a route's own host serves it.
func TestConformance(t *testing.T) {
	t.Parallel()
	https, plain := freePorts(t)
	ca := newCA(t)
	up := upstream(t, "conf")
	var mu sync.Mutex
	specs := map[string]json.RawMessage{}
	hostOf := func(tenant string) string { return tenant + ".conf.test" }
	requestFor := func(tenant string) json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		if specs[tenant] == nil {
			specs[tenant] = routeSpec(t, []string{hostOf(tenant)}, up.Listener.Addr().String(), ca.issue(t, hostOf(tenant)))
		}
		return specs[tenant]
	}
	// get asks for host over a TLS connection opened for sni, on the front door.
	get := func(ctx context.Context, sni, host string) (int, string, error) {
		tr := &http.Transport{
			ForceAttemptHTTP2: true,
			TLSClientConfig:   &tls.Config{RootCAs: ca.pool, ServerName: sni},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(https)))
			},
		}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(host, strconv.Itoa(https))+"/", nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, "", err
		}
		body := readAll(t, resp)
		return resp.StatusCode, body, nil
	}
	conformance.Resource(t, binary, conformance.ResourceCase{
		Type:         contract.Route,
		Settings:     testSettings(t, https, plain),
		RequestFor:   requestFor,
		Secrets:      map[string][]byte{"tls-key": ca.keyPEM},
		Invalid:      []byte(`{"hosts": ["feeds.acme.test", "not a host"], "upstream": "127.0.0.1:8080"}`),
		InvalidField: "request/hosts/1",
		Access: func(ctx context.Context, from, to conformance.Provisioned) error {
			status, body, err := get(ctx, hostOf(from.Tenant), hostOf(to.Tenant))
			switch {
			case err != nil:
				return err
			case status != http.StatusOK || body != "conf "+hostOf(to.Tenant):
				return fmt.Errorf("status %d, body %q", status, body)
			}
			return nil
		},
		Exists: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			status, body, err := get(ctx, hostOf(p.Tenant), hostOf(p.Tenant))
			if err != nil {
				// No certificate for the name: the handshake fails.
				if strings.Contains(err.Error(), "tls") {
					return false, nil
				}
				return false, err
			}
			return status == http.StatusOK && body == "conf "+hostOf(p.Tenant), nil
		},
	})
}
