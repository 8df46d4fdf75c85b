package main

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOriginBelievesOnlyTrustedProxies(t *testing.T) {
	s := &server{trustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	cases := []struct {
		name, peer, xff, xfh string
		client, host         string
	}{
		{"direct client claiming an address", "198.51.100.7:4000", "203.0.113.9", "auth.b.test", "198.51.100.7", "auth.a.test"},
		{"trusted proxy", "10.0.0.2:4000", "203.0.113.9", "auth.b.test", "203.0.113.9", "auth.b.test"},
		{"client-made entries left of the proxy's", "10.0.0.2:4000", "192.0.2.66, 203.0.113.9", "", "203.0.113.9", "auth.a.test"},
		{"chain of trusted proxies", "10.0.0.2:4000", "203.0.113.9, 10.0.0.3", "", "203.0.113.9", "auth.a.test"},
		{"garbage stops the walk", "10.0.0.2:4000", "203.0.113.9, not-an-ip, 10.0.0.3", "", "10.0.0.3", "auth.a.test"},
		{"no header", "10.0.0.2:4000", "", "", "10.0.0.2", "auth.a.test"},
		{"two forwarded hosts are not believed", "10.0.0.2:4000", "", "auth.b.test, auth.c.test", "10.0.0.2", "auth.a.test"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://auth.a.test/login", nil)
			r.RemoteAddr = c.peer
			if c.xff != "" {
				r.Header.Set("X-Forwarded-For", c.xff)
			}
			if c.xfh != "" {
				r.Header.Set("X-Forwarded-Host", c.xfh)
			}
			o := s.originOf(r)
			require.Equal(t, c.client, o.client.String())
			require.Equal(t, c.host, o.host)
		})
	}
}

func TestHostKey(t *testing.T) {
	require.Equal(t, "auth.example.org", hostKey("Auth.Example.org:443"))
	require.Equal(t, "auth.example.org:8443", hostKey("auth.example.org:8443"))
	require.Equal(t, "auth.example.org", hostKey("auth.example.org."))
}

// FuzzForwardedFor checks that any X-Forwarded-For gives a valid address, and never one
// a trusted proxy did not see connect.
func FuzzForwardedFor(f *testing.F) {
	f.Add("203.0.113.9")
	f.Add("192.0.2.66, 203.0.113.9, 10.0.0.3")
	f.Add("::ffff:203.0.113.9,,  ")
	f.Add("[2001:db8::1]:443, unknown")
	trusted := func(a netip.Addr) bool { return netip.MustParsePrefix("10.0.0.0/8").Contains(a) }
	peer := netip.MustParseAddr("10.0.0.2")
	f.Fuzz(func(t *testing.T, xff string) {
		got := clientFromForwarded([]string{xff}, peer, trusted)
		if !got.IsValid() {
			t.Fatalf("no valid address from %q", xff)
		}
		if got.Is4In6() {
			t.Fatalf("an unmapped address was kept mapped: %s", got)
		}
	})
}
