package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

var tenantCounter atomic.Int64

// newTenant returns a tenant name no other test uses.
func newTenant() string { return fmt.Sprintf("t%d-%d", os.Getpid()%10000, tenantCounter.Add(1)) }

func setup(t testing.TB) *provider {
	t.Helper()
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), settingsJSON()))
	return p
}

func requestFor(zone string, records ...contract.DNSRecord) json.RawMessage {
	if records == nil {
		records = []contract.DNSRecord{}
	}
	b, _ := json.Marshal(contract.DNSRequest{Zone: zone, Records: records})
	return b
}

func provision(t testing.TB, p *provider, tenant string, spec json.RawMessage) (contract.DNSResult, map[string][]byte) {
	t.Helper()
	res, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec})
	require.NoError(t, err, namedLog())
	var r contract.DNSResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	return r, res.Secrets
}

// signedUpdate adds a TXT record to zone with the update key of result r and secrets.
func signedUpdate(ctx context.Context, r contract.DNSResult, secrets map[string][]byte, zone, text string) error {
	if r.Update == nil {
		return errors.New("the result has no update key")
	}
	s := signer{zoneKey{name: r.Update.KeyName, secret: string(secrets[r.Update.Secret.Secret])}}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	rr, err := newRR("access."+dns.Fqdn(zone), 60, "TXT", text)
	if err != nil {
		return err
	}
	m.Insert([]dns.RR{rr})
	return s.update(ctx, r.Update.Server, m)
}

func lookup(t testing.TB, name string, rtype uint16) []string {
	t.Helper()
	got, err := query(context.Background(), &dns.Client{Net: "udp", Timeout: 2 * time.Second}, testServer.DNSAddr, rrsetKey{dns.Fqdn(name), rtype})
	require.NoError(t, err)
	var values []string
	for _, s := range got {
		f := strings.SplitN(s, "\t", 5)
		values = append(values, f[len(f)-1])
	}
	return values
}

func TestConformance(t *testing.T) {
	zoneOfTenant := func(tenant string) string { return tenant + ".conformance.test" }
	conformance.Resource(t, pluginBinary, conformance.ResourceCase{
		Type:     "dns",
		Settings: settingsJSON(),
		RequestFor: func(tenant string) json.RawMessage {
			return requestFor(zoneOfTenant(tenant),
				contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"},
				contract.DNSRecord{Name: "_acme-challenge.feeds", Type: "TXT", Value: "challenge-token"})
		},
		Invalid:      requestFor("a.test", contract.DNSRecord{Name: "feeds", Type: "A", Value: "not-an-address"}),
		InvalidField: "request/records/0/value",
		Access: func(ctx context.Context, from, to conformance.Provisioned) error {
			var r contract.DNSResult
			if err := json.Unmarshal(from.Result, &r); err != nil {
				return err
			}
			return signedUpdate(ctx, r, from.Secrets, zoneOfTenant(to.Tenant), from.Tenant)
		},
		Exists: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			return zoneServed(ctx, testServer.DNSAddr, dns.Fqdn(zoneOfTenant(p.Tenant)))
		},
	})
}

// Tenant A's key, valid on A's zone, is refused by BIND on B's zone: the update-policy of
// each zone grants its own key alone.
func TestKeyOfOneZoneIsRefusedOnAnother(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	a, b := newTenant(), newTenant()
	ra, sa := provision(t, p, a, requestFor(a+".test"))
	_, _ = provision(t, p, b, requestFor(b+".test", contract.DNSRecord{Name: "www", Type: "A", Value: "192.0.2.2"}))
	t.Cleanup(func() {
		for _, tn := range []string{a, b} {
			_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tn, Instance: "main", Type: "dns", Spec: requestFor(tn + ".test")})
		}
	})

	require.NoError(t, signedUpdate(ctx, ra, sa, a+".test", "mine"))
	require.Equal(t, []string{`"mine"`}, lookup(t, "access."+a+".test", dns.TypeTXT))

	err := signedUpdate(ctx, ra, sa, b+".test", "theirs")
	var refused *updateRefused
	require.ErrorAs(t, err, &refused)
	require.Equal(t, dns.RcodeRefused, refused.rcode, "BIND's answer to A's key on B's zone")
	require.Empty(t, lookup(t, "access."+b+".test", dns.TypeTXT))
	require.Equal(t, []string{"192.0.2.2"}, lookup(t, "www."+b+".test", dns.TypeA), "B's zone is untouched")

	// An unsigned update and one signed with a key named like A's but another secret
	// are refused too.
	forged := map[string][]byte{secretKey: []byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")}
	require.Error(t, signedUpdate(ctx, ra, forged, a+".test", "forged"))
	require.Equal(t, []string{`"mine"`}, lookup(t, "access."+a+".test", dns.TypeTXT))
}

// Provision publishes exactly the records asked for and waits until they are answered;
// a second provision with other records converges; deprovision removes zone and key.
func TestRecordsServedThenGone(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	zone := tenant + ".example"
	spec := requestFor(zone,
		contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"},
		contract.DNSRecord{Name: "feeds", Type: "AAAA", Value: "2001:db8::10"},
		contract.DNSRecord{Name: "www", Type: "CNAME", Value: "feeds." + zone, TTL: 60},
		contract.DNSRecord{Name: "_acme-challenge.feeds", Type: "TXT", Value: "token-one"},
		contract.DNSRecord{Name: "_acme-challenge.feeds", Type: "TXT", Value: "token-two"},
		contract.DNSRecord{Name: "@", Type: "MX", Value: "10 mail.provider.test"},
	)
	r, secrets := provision(t, p, tenant, spec)
	require.Equal(t, zone, r.Zone)
	require.Equal(t, []string{"ns1.provider.test", "ns2.provider.test"}, r.Nameservers)
	require.Len(t, r.Records, 6)
	require.Equal(t, 300, r.Records[0].TTL, "the default TTL is filled in")
	require.Equal(t, &contract.DNSUpdate{Server: testServer.DNSAddr, KeyName: "main." + tenant + ".fedhost.", Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: secretKey}}, r.Update)
	require.Len(t, secrets[secretKey], 44, "32 random bytes in base64")
	raw, _ := json.Marshal(r)
	require.NotContains(t, string(raw), string(secrets[secretKey]))

	require.Equal(t, []string{"192.0.2.10"}, lookup(t, "feeds."+zone, dns.TypeA))
	require.Equal(t, []string{"2001:db8::10"}, lookup(t, "feeds."+zone, dns.TypeAAAA))
	require.Equal(t, []string{"feeds." + zone + "."}, lookup(t, "www."+zone, dns.TypeCNAME))
	require.Equal(t, []string{`"token-one"`, `"token-two"`}, lookup(t, "_acme-challenge.feeds."+zone, dns.TypeTXT))
	require.Equal(t, []string{"10 mail.provider.test."}, lookup(t, zone, dns.TypeMX))
	require.Equal(t, []string{"ns1.provider.test.", "ns2.provider.test."}, lookup(t, zone, dns.TypeNS))

	st, err := p.Status(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec})
	require.NoError(t, err)
	require.Equal(t, "ready", st.State, st.Message)

	// The same request again finds nothing to change, sends no update, and the serial stays.
	serial := lookup(t, zone, dns.TypeSOA)
	w, err := parseRequest(spec, 300)
	require.NoError(t, err)
	changed, err := signer{zoneKey{name: r.Update.KeyName, secret: string(secrets[secretKey])}}.converge(ctx, testServer.DNSAddr, w.zone, w.rrs)
	require.NoError(t, err)
	require.Empty(t, changed)
	_, err = p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec, Secrets: secrets})
	require.NoError(t, err)
	require.Equal(t, serial, lookup(t, zone, dns.TypeSOA))

	// The challenge is done and the address moves: the TXT set goes, A changes.
	spec2 := requestFor(zone,
		contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.11"},
		contract.DNSRecord{Name: "feeds", Type: "AAAA", Value: "2001:db8::10"},
	)
	res, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec2, Secrets: secrets})
	require.NoError(t, err)
	require.Equal(t, secrets[secretKey], res.Secrets[secretKey], "the key stays")
	require.Equal(t, []string{"192.0.2.11"}, lookup(t, "feeds."+zone, dns.TypeA))
	require.Empty(t, lookup(t, "_acme-challenge.feeds."+zone, dns.TypeTXT))
	require.Empty(t, lookup(t, "www."+zone, dns.TypeCNAME))
	require.Empty(t, lookup(t, zone, dns.TypeMX))

	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec2}))
	served, err := zoneServed(ctx, testServer.DNSAddr, zone+".")
	require.NoError(t, err)
	require.False(t, served, "the zone is gone from the server")
	_, err = p.cfg.rndc.showzone(ctx, zone)
	require.ErrorIs(t, err, errNoZone)
	keys, err := readKeys(testServer.KeysFile)
	require.NoError(t, err)
	require.NotContains(t, keys, "main."+tenant+".fedhost.")
	_, err = os.Stat(testServer.ZonesDir + "/" + zone + ".db")
	require.True(t, os.IsNotExist(err), "the zone file is gone")
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec2}), "a second deprovision is no error")
	st, err = p.Status(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec2})
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)
}

// A zone held by one deployment, or put on the server by hand, is refused to another.
func TestZoneOfAnotherIsAConflict(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	a, b := newTenant(), newTenant()
	zone := fmt.Sprintf("z%d.shared.test", tenantCounter.Add(1))
	provision(t, p, a, requestFor(zone))
	t.Cleanup(func() {
		_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: a, Instance: "main", Type: "dns", Spec: requestFor(zone)})
	})
	_, err := p.Provision(ctx, resource.Request{Tenant: b, Instance: "main", Type: "dns", Spec: requestFor(zone)})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), zone)
	require.NotContains(t, err.Error(), a, "the refusal does not name the other deployment")

	// B's deprovision of that zone leaves A's zone alone.
	require.NoError(t, p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: b, Instance: "main", Type: "dns", Spec: requestFor(zone)}))
	served, err := zoneServed(ctx, testServer.DNSAddr, zone+".")
	require.NoError(t, err)
	require.True(t, served)

	// A zone added by hand, granting no fedhost key, is not adopted.
	manual := b + ".manual.test"
	file := testServer.ZonesDir + "/" + manual + ".db"
	require.NoError(t, os.WriteFile(file, []byte("$TTL 300\n@ SOA ns1.provider.test. hostmaster.provider.test. 1 3600 600 1209600 300\n@ NS ns1.provider.test.\n"), 0o644))
	_, err = p.cfg.rndc.run(ctx, "addzone", manual, fmt.Sprintf(`{ type primary; file %q; };`, file))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.cfg.rndc.delzone(ctx, manual) })
	_, err = p.Provision(ctx, resource.Request{Tenant: b, Instance: "main", Type: "dns", Spec: requestFor(manual)})
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	t.Cleanup(func() {
		_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: b, Instance: "main", Type: "dns", Spec: requestFor(manual)})
	})
}

func TestInvalidRequestsNameTheField(t *testing.T) {
	t.Parallel()
	p := setup(t)
	cases := []struct {
		spec  json.RawMessage
		field string
	}{
		{requestFor("localhost"), "request/zone"},
		{requestFor("192.0.2.1"), "request/zone"},
		{requestFor(strings.Repeat("a", 60) + "." + strings.Repeat("b.", 100) + "test"), "request/zone"},
		{requestFor("a.test", contract.DNSRecord{Name: "Bad Name", Type: "A", Value: "192.0.2.1"}), "request/records/0/name"},
		{requestFor("a.test", contract.DNSRecord{Name: "x", Type: "AAAA", Value: "192.0.2.1"}), "request/records/0/value"},
		{requestFor("a.test", contract.DNSRecord{Name: "@", Type: "CNAME", Value: "b.test"}), "request/records/0/type"},
		{requestFor("a.test", contract.DNSRecord{Name: "x", Type: "CNAME", Value: "b.test"}, contract.DNSRecord{Name: "x", Type: "TXT", Value: "t"}), "request/records/1/name"},
		{requestFor("a.test", contract.DNSRecord{Name: "x", Type: "A", Value: "192.0.2.1", TTL: 60}, contract.DNSRecord{Name: "x", Type: "A", Value: "192.0.2.2", TTL: 120}), "request/records/1/ttl"},
		{requestFor("a.test", contract.DNSRecord{Name: "x", Type: "SOA", Value: "x"}), "request/records/0/type"},
		{requestFor("a.test", contract.DNSRecord{Name: "x", Type: "TXT", Value: "a\nb"}), "request/records/0/value"},
		{requestFor("a.test", slices.Repeat([]contract.DNSRecord{{Name: "x", Type: "TXT", Value: "t"}}, maxRecords+1)...), "request/records"},
	}
	for _, c := range cases {
		_, err := p.Provision(context.Background(), resource.Request{Tenant: newTenant(), Instance: "main", Type: "dns", Spec: c.spec})
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%s: %v", c.spec, err)
		require.Equal(t, c.field, sdk.FieldOf(err), "%s: %v", c.spec, err)
		require.NotContains(t, err.Error(), "192.0.2", "no refusal echoes the value")
	}
}

func TestSettingsRefusedNameTheField(t *testing.T) {
	t.Parallel()
	var base map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(), &base))
	cases := []struct {
		change func(map[string]any)
		field  string
	}{
		{func(s map[string]any) { s["primary"] = "no-port" }, "settings/primary"},
		{func(s map[string]any) { s["nameservers"] = []string{"ns1"} }, "settings/nameservers/0"},
		{func(s map[string]any) { s["rndc"].(map[string]any)["key_file"] = "/nonexistent/rndc.key" }, "settings/rndc/key_file"},
		{func(s map[string]any) { s["keys_file"] = "relative.conf" }, "settings/keys_file"},
		{func(s map[string]any) { s["zones_directory"] = "/nonexistent" }, "settings/zones_directory"},
	}
	for _, c := range cases {
		s := map[string]any{}
		raw, _ := json.Marshal(base)
		require.NoError(t, json.Unmarshal(raw, &s))
		c.change(s)
		raw, _ = json.Marshal(s)
		err := (&provider{}).Configure(context.Background(), raw)
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
		require.Equal(t, c.field, sdk.FieldOf(err), "%v", err)
	}
}

// A server of the settings that does not answer fails the provision within wait_seconds,
// naming the server and the record set.
func TestUnansweringServerIsNamed(t *testing.T) {
	t.Parallel()
	var s map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(), &s))
	s["servers"] = []string{testServer.DNSAddr, "127.0.0.1:9"}
	s["wait_seconds"] = 1
	raw, _ := json.Marshal(s)
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), raw))
	tenant := newTenant()
	spec := requestFor(tenant+".wait.test", contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"})
	t.Cleanup(func() {
		_ = setup(t).Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec})
	})
	start := time.Now()
	_, err := p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec})
	require.Error(t, err)
	// It gives up instead of waiting on: a bound far above wait_seconds, for a loaded machine.
	require.Less(t, time.Since(start), 30*time.Second)
	require.Contains(t, err.Error(), "127.0.0.1:9")
	require.Contains(t, err.Error(), "zone "+tenant+".wait.test", "a new zone is waited for first")
}

// The secret the host gives back is the key's: a new one replaces the old in named.
func TestGivenSecretIsTheKey(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	zone := tenant + ".secret.test"
	r, old := provision(t, p, tenant, requestFor(zone))
	t.Cleanup(func() {
		_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "dns", Spec: requestFor(zone)})
	})
	given := map[string][]byte{secretKey: []byte("c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA==")}
	res, err := p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: requestFor(zone), Secrets: given})
	require.NoError(t, err)
	require.Equal(t, given[secretKey], res.Secrets[secretKey])
	require.NoError(t, signedUpdate(ctx, r, given, zone, "new key"))
	require.Error(t, signedUpdate(ctx, r, old, zone, "old key"), "the old secret no longer signs")

	_, err = p.Provision(ctx, resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: requestFor(zone), Secrets: map[string][]byte{secretKey: []byte("short")}})
	require.Equal(t, "secrets/"+secretKey, sdk.FieldOf(err), "%v", err)
	require.NotContains(t, err.Error(), "short")
}

// A deployment whose domain changes gets the new zone and loses the old one.
func TestNewDomainMovesTheZone(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	tenant := newTenant()
	first, second := tenant+".first.test", tenant+".second.test"
	provision(t, p, tenant, requestFor(first, contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"}))
	r, _ := provision(t, p, tenant, requestFor(second, contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"}))
	t.Cleanup(func() {
		_ = p.Deprovision(ctx, resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "dns", Spec: requestFor(second)})
	})
	require.Equal(t, second, r.Zone)
	require.Equal(t, []string{"192.0.2.10"}, lookup(t, "feeds."+second, dns.TypeA))
	served, err := zoneServed(ctx, testServer.DNSAddr, first+".")
	require.NoError(t, err)
	require.False(t, served, "the old zone is gone")
}

// A server that serves the zone but not a record (a secondary behind, say) fails the
// provision naming the record set and the server.
func TestServerBehindIsNamedWithTheRecord(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	stale := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		if q.Question[0].Qtype == dns.TypeSOA {
			soa, _ := dns.NewRR(q.Question[0].Name + " 300 IN SOA ns1.provider.test. hostmaster.provider.test. 1 3600 600 1209600 300")
			m.Answer = append(m.Answer, soa)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = stale.ActivateAndServe() }()
	t.Cleanup(func() { _ = stale.Shutdown() })

	var s map[string]any
	require.NoError(t, json.Unmarshal(settingsJSON(), &s))
	s["servers"] = []string{testServer.DNSAddr, pc.LocalAddr().String()}
	s["wait_seconds"] = 1
	raw, _ := json.Marshal(s)
	p := &provider{}
	require.NoError(t, p.Configure(context.Background(), raw))
	tenant := newTenant()
	zone := tenant + ".behind.test"
	spec := requestFor(zone, contract.DNSRecord{Name: "feeds", Type: "A", Value: "192.0.2.10"})
	t.Cleanup(func() {
		_ = setup(t).Deprovision(context.Background(), resource.DeprovisionRequest{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec})
	})
	_, err = p.Provision(context.Background(), resource.Request{Tenant: tenant, Instance: "main", Type: "dns", Spec: spec})
	require.Error(t, err)
	require.Contains(t, err.Error(), pc.LocalAddr().String()+" does not answer feeds."+zone+" A as published")
}
