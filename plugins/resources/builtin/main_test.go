package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/ldaptest"
	"github.com/fedhost/fedhost/internal/plugintest"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// testServer is the slapd every test of this binary shares; pluginBinary is this
// package's plugin, built beside it.
var (
	testServer   *ldaptest.Server
	pluginBinary string
)

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	// A fuzzing worker runs only the fuzz targets, which need neither slapd nor the binary.
	flag.Parse()
	if w := flag.Lookup("test.fuzzworker"); w != nil && w.Value.String() == "true" {
		os.Exit(m.Run())
	}
	plugintest.MainWithServer(m, "slapd", func(dir string) (func(), error) {
		s, stop, err := ldaptest.Start(dir)
		if err != nil {
			return nil, err
		}
		testServer, pluginBinary = s, filepath.Join(dir, "fedhost-resource-builtin")
		if out, err := exec.Command("go", "build", "-o", pluginBinary, ".").CombinedOutput(); err != nil {
			stop()
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		return stop, nil
	})
}

// testDirectory makes a deployment's subtree the way the openldap provider does
// (ou=<tenant> with ou=users, ou=groups and the bind account cn=<tenant>-<instance>,
// which slapd.TenantACL limits to the subtree) and returns its ldap result and password.
type testDirectory struct {
	result   contract.LDAPResult
	password string
}

func newTestDirectory(t testing.TB, tenant string) testDirectory {
	t.Helper()
	c, err := testServer.Admin()
	require.NoError(t, err)
	defer c.Close()
	root := "ou=" + tenant + "," + testServer.BaseDN
	for _, dn := range []string{root, "ou=users," + root, "ou=groups," + root} {
		a := ldap.NewAddRequest(dn, nil)
		a.Attribute("objectClass", []string{"organizationalUnit"})
		a.Attribute("ou", []string{strings.TrimPrefix(strings.SplitN(dn, ",", 2)[0], "ou=")})
		if err := c.Add(a); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
			t.Fatalf("adding %s: %v", dn, err)
		}
	}
	pw := rand.Text()
	bind := "cn=" + tenant + "-dir," + root
	a := ldap.NewAddRequest(bind, nil)
	a.Attribute("objectClass", []string{"organizationalRole", "simpleSecurityObject"})
	a.Attribute("cn", []string{tenant + "-dir"})
	a.Attribute("userPassword", []string{pw})
	if err := c.Add(a); ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		require.NoError(t, c.Modify(modifyPassword(bind, pw)))
	} else {
		require.NoError(t, err)
	}
	return testDirectory{password: pw, result: contract.LDAPResult{
		URL: testServer.URL, BaseDN: root, UsersDN: "ou=users," + root, GroupsDN: "ou=groups," + root,
		BindDN: bind, BindPassword: contract.SecretRef{Secret: "bind-password"},
	}}
}

func modifyPassword(dn, pw string) *ldap.ModifyRequest {
	m := ldap.NewModifyRequest(dn, nil)
	m.Replace("userPassword", []string{pw})
	return m
}

// addUser adds uid=name with a password and a mail address.
func (d testDirectory) addUser(t testing.TB, name, password string) {
	t.Helper()
	c, err := testServer.Admin()
	require.NoError(t, err)
	defer c.Close()
	a := ldap.NewAddRequest("uid="+name+","+d.result.UsersDN, nil)
	a.Attribute("objectClass", []string{"inetOrgPerson"})
	a.Attribute("uid", []string{name})
	a.Attribute("cn", []string{strings.ToUpper(name[:1]) + name[1:] + " Example"})
	a.Attribute("sn", []string{"Example"})
	a.Attribute("mail", []string{name + "@example.org"})
	a.Attribute("userPassword", []string{password})
	require.NoError(t, c.Add(a))
}

// addGroup adds a groupOfNames with the users as members.
func (d testDirectory) addGroup(t testing.TB, name string, users ...string) {
	t.Helper()
	c, err := testServer.Admin()
	require.NoError(t, err)
	defer c.Close()
	a := ldap.NewAddRequest("cn="+name+","+d.result.GroupsDN, nil)
	a.Attribute("objectClass", []string{"groupOfNames"})
	a.Attribute("cn", []string{name})
	var members []string
	for _, u := range users {
		members = append(members, "uid="+u+","+d.result.UsersDN)
	}
	a.Attribute("member", members)
	require.NoError(t, c.Add(a))
}

// removeSubtree deletes what newTestDirectory and the adds made.
func (d testDirectory) remove(t testing.TB) {
	c, err := testServer.Admin()
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer c.Close()
	res, err := c.Search(ldap.NewSearchRequest(d.result.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"1.1"}, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return
	}
	if err != nil {
		t.Errorf("cleanup of %s: %v", d.result.BaseDN, err)
		return
	}
	dns := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		dns = append(dns, e.DN)
	}
	// Leaves first: a longer DN is never the parent of a shorter one.
	sort.Slice(dns, func(i, j int) bool { return len(dns[i]) > len(dns[j]) })
	for _, dn := range dns {
		if err := c.Del(ldap.NewDelRequest(dn, nil)); err != nil {
			t.Errorf("cleanup of %s: %v", dn, err)
		}
	}
}

// frontDoor is a TLS-terminating reverse proxy, as Caddy is in front of the plugin:
// every host name it is asked for gets a certificate of a test CA, and requests go to
// the plugin's upstream with the Host kept and X-Forwarded-* set.
type frontDoor struct {
	srv  *httptest.Server
	pool *x509.CertPool
	// upstream is where requests go; set once the plugin reports its listener.
	mu       sync.Mutex
	upstream string
}

func newFrontDoor(t testing.TB) *frontDoor {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fedhost test front door"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	f := &frontDoor{pool: x509.NewCertPool()}
	f.pool.AddCert(ca)
	var certs sync.Map
	getCert := func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c, ok := certs.Load(hello.ServerName); ok {
			return c.(*tls.Certificate), nil
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: hello.ServerName},
			DNSNames: []string{hello.ServerName}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		certs.Store(hello.ServerName, c)
		return c, nil
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		f.mu.Lock()
		up := f.upstream
		f.mu.Unlock()
		r.SetURL(&url.URL{Scheme: "http", Host: up})
		r.Out.Host = r.In.Host
		r.SetXForwarded()
	}}
	f.srv = httptest.NewUnstartedServer(proxy)
	f.srv.TLS = &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *frontDoor) setUpstream(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstream = u
}

// port is the front door's port, part of every issuer URL in the tests.
func (f *frontDoor) port() string {
	return f.srv.Listener.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]
}

// issuer is the issuer URL of tenant behind this front door.
func (f *frontDoor) issuer(tenant string) string {
	return "https://auth." + tenant + ".test:" + f.port() + "/"
}

// browser is an HTTP client that reaches every host name through the front door, keeps
// cookies and does not follow redirects, so a test sees each step.
func (f *frontDoor) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	addr := f.srv.Listener.Addr().String()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 64,
	}
	return &http.Client{
		Jar: jar, Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// plugin is the provider binary running with its log captured.
type plugin struct {
	p    *client.Plugin
	rc   *resource.Client
	logs *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPlugin runs the binary on dataDir with settings; it is killed at the test's end.
func startPlugin(t testing.TB, dataDir string, settings string) *plugin {
	t.Helper()
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.Start(ctx, pluginBinary, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+dataDir))
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.NoError(t, p.Configure(ctx, json.RawMessage(settings)))
	return &plugin{p: p, rc: p.Resource(), logs: logs}
}

// registered is a provisioned client with its secrets.
type registered struct {
	tenant, instance string
	result           contract.OIDCResult
	secrets          map[string][]byte
	redirect         string
}

// provision registers tenant/instance at the front door's issuer of tenant with d.
func (pl *plugin) provision(t testing.TB, f *frontDoor, tenant, instance string, d testDirectory, allowed []string, extra map[string][]byte) registered {
	t.Helper()
	redirect := "https://" + instance + "." + tenant + ".test/oauth2/callback"
	dir := d.result
	spec, err := json.Marshal(contract.OIDCRequest{
		Name: "App " + instance, RedirectURIs: []string{redirect}, AllowedGroups: allowed,
		Issuer: f.issuer(tenant), Directory: &dir,
	})
	require.NoError(t, err)
	secrets := map[string][]byte{"bind-password": []byte(d.password)}
	for k, v := range extra {
		secrets[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := pl.rc.Provision(ctx, resource.Request{Tenant: tenant, Instance: instance, Type: "oidc", Spec: spec, Secrets: secrets})
	require.NoError(t, err)
	var r contract.OIDCResult
	require.NoError(t, json.Unmarshal(res.Data, &r))
	f.setUpstream(r.Upstream)
	return registered{tenant: tenant, instance: instance, result: r, secrets: res.Secrets, redirect: redirect}
}

var (
	hiddenID   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	hiddenCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// loginForm follows an authorization URL to the log-in page, in a browser without a
// session at the issuer (its cookies are dropped first), and returns the page's form
// fields (id and csrf) and the page.
func loginForm(t testing.TB, b *http.Client, authURL string) (id, csrf string, page string) {
	t.Helper()
	b.Jar, _ = cookiejar.New(nil)
	resp, err := b.Get(authURL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "authorize: %s", body)
	loc, err := resp.Location()
	require.NoError(t, err)
	require.Equal(t, loginPath, loc.Path, "authorize redirected to %s", loc)
	resp, err = b.Get(loc.String())
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "log-in page: %s", body)
	m1, m2 := hiddenID.FindSubmatch(body), hiddenCSRF.FindSubmatch(body)
	require.NotNil(t, m1, "no id in the log-in page")
	require.NotNil(t, m2, "no csrf in the log-in page")
	return html.UnescapeString(string(m1[1])), html.UnescapeString(string(m2[1])), string(body)
}

// postLogin submits the form and returns the response with its body read.
func postLogin(t testing.TB, b *http.Client, issuer, id, csrf, name, password string) (*http.Response, string) {
	t.Helper()
	resp, err := b.PostForm(strings.TrimSuffix(issuer, "/")+loginPath, url.Values{"id": {id}, "csrf": {csrf}, "username": {name}, "password": {password}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// clientAuthenticates returns nil when issuer's revocation endpoint takes the client's
// credentials (revoking a token nobody holds) and an error otherwise.
func clientAuthenticates(b *http.Client, issuer, id, secret string) error {
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(issuer, "/")+"/revoke", strings.NewReader(url.Values{"token": {"no-such-token"}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := b.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s refused client %s: %d %s", issuer, id, resp.StatusCode, body)
	}
	return nil
}
