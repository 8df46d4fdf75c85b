package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/bindtest"
	"github.com/fedhost/fedhost/internal/pebbletest"
)

// frontDoor is a host whose apps go through the real front door: zones on a real BIND
// (rfc2136), certificates from a real pebble validating DNS-01 through that BIND (acme),
// and a real Caddy (caddy).
type frontDoor struct {
	h      *host
	bind   *bindtest.Server
	pebble *pebbletest.Server
	root   *x509.Certificate // pebble's issuing root
}

// renewAfter is how soon after issuance a certificate of the test pebble is due: its
// certificates are valid 30 days and this long, and the acme provider renews 30 days
// before expiry, so the scheduler renews them while the test runs.
const renewAfter = 45 * time.Second

func startFrontDoor(t testing.TB) *frontDoor {
	t.Helper()
	dir, err := os.MkdirTemp("", "fedhost-e2e-frontdoor-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bind"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "pebble"), 0o755))
	bind, stopBind, err := bindtest.Start(filepath.Join(dir, "bind"))
	require.NoError(t, err)
	t.Cleanup(stopBind)
	pebble, stopPebble, err := pebbletest.Start(filepath.Join(dir, "pebble"), pebbletest.Options{
		DNSServer: bind.DNSAddr, ValidityPeriod: 30*24*time.Hour + renewAfter})
	require.NoError(t, err)
	t.Cleanup(stopPebble)
	root, err := pebble.Root(context.Background())
	require.NoError(t, err)

	hcl := fmt.Sprintf(`
update_check_interval = "5s"
front_door_addresses  = "127.0.0.1"

resource "postgresql" {
  provider = "postgresql"
  settings = { managed = true }
}
resource "s3" {
  provider = "versitygw"
  settings = { managed = true }
}
resource "secret" { provider = "embedded" }
resource "instance" {
  provider = "local"
  limits   = { per_deployment = 8 }
}
resource "dns" {
  provider = "rfc2136"
  settings = {
    primary         = %q
    nameservers     = ["ns1.provider.test", "ns2.provider.test"]
    rndc            = { address = "127.0.0.1", port = %d, key_file = %q }
    keys_file       = %q
    zones_directory = %q
    wait_seconds    = 10
  }
}
resource "tls" {
  provider = "acme"
  settings = {
    directory_url     = %q
    ca_certificates   = %q
    resolvers         = [%q]
    renew_before_days = 30
  }
}
resource "route" {
  provider = "caddy"
  settings = { managed = true, listen = "127.0.0.1" }
}
`, bind.DNSAddr, bind.ControlPort, bind.RNDCKeyFile, bind.KeysFile, bind.ZonesDir, pebble.DirectoryURL, pebble.CAFile, bind.DNSAddr)
	path := filepath.Join(dir, "fedhost.hcl")
	require.NoError(t, os.WriteFile(path, []byte(hcl), 0o600))
	return &frontDoor{h: startHost(t, "FEDHOST_CONFIG="+path), bind: bind, pebble: pebble, root: root}
}

// client speaks HTTPS to the front door for any name, as curl --resolve does, trusting
// pebble's root alone.
func (f *frontDoor) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(f.root)
	addr := "127.0.0.1:" + strconv.Itoa(f.h.httpsPort)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// get fetches url through the front door: its status, protocol, body and the serial of
// the certificate served.
func (f *frontDoor) get(url string) (status, proto int, body, serial string, err error) {
	resp, err := f.client().Get(url)
	if err != nil {
		return 0, 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		serial = resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
	}
	return resp.StatusCode, resp.ProtoMajor, string(b), serial, err
}

// signInPage waits until url answers Miniflux's sign-in page over HTTP/2 and returns the
// serial of the certificate it was served with.
func (f *frontDoor) signInPage(t *testing.T, url string, within time.Duration) string {
	t.Helper()
	var last string
	var serial string
	ok := false
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		status, proto, body, s, err := f.get(url)
		if err == nil && status == http.StatusOK && proto == 2 && strings.Contains(body, "<title>Sign In - Miniflux</title>") {
			serial, ok = s, true
			break
		}
		last = fmt.Sprintf("status %d, HTTP/%d, error %v", status, proto, err)
		time.Sleep(200 * time.Millisecond)
	}
	require.True(t, ok, "%s did not answer Miniflux's sign-in page over HTTP/2 within %s: %s", url, within, last)
	return serial
}

func (f *frontDoor) lookup(t *testing.T, name string, typ uint16) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), typ)
	in, err := dns.Exchange(m, f.bind.DNSAddr)
	require.NoError(t, err)
	var out []string
	for _, rr := range in.Answer {
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.NS:
			out = append(out, v.Ns)
		}
	}
	return out
}

// A Miniflux deployment on acme.test through BIND, pebble and Caddy: the record is
// answered, pebble issues through DNS-01, the sign-in page comes over HTTP/2 with a chain
// to pebble's root, in curl and in Chromium; the second submit changes nothing; the
// scheduler renews the certificate when it is due; Caddy killed and the host restarted,
// the route is back.
func TestFrontDoorOnBINDPebbleAndCaddy(t *testing.T) {
	f := startFrontDoor(t)
	h := f.h
	d := h.create("acme")
	b := h.wait(h.submit(d.ID, minifluxConfig("acme.test", nil)).ID)
	require.Equal(t, "succeeded", b.State, "events: %+v\nlog:\n%s", b.Events, h.log)
	issuedAt := time.Now()
	url := fmt.Sprintf("https://feeds.acme.test:%d/", h.httpsPort)

	// The zone is on BIND with the app's record, and the build said where it answers.
	require.Equal(t, []string{"127.0.0.1"}, f.lookup(t, "feeds.acme.test", dns.TypeA))
	require.ElementsMatch(t, []string{"ns1.provider.test.", "ns2.provider.test."}, f.lookup(t, "acme.test", dns.TypeNS))
	said := false
	for _, e := range b.Events {
		said = said || strings.Contains(e.Message, "app miniflux answers at "+url)
	}
	require.True(t, said, "the build says where the app answers: %+v", b.Events)

	// The sign-in page over HTTP/2, its chain verified against pebble's root for the name.
	serial := f.signInPage(t, url, 30*time.Second)
	// Miniflux was told its public URL.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", h.nodePID("acme", "miniflux-web")))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(environ), "\x00"), "BASE_URL="+url)

	// The API says where the app answers, its certificate and the zone's records.
	var status struct {
		FrontDoor struct {
			Apps []struct {
				App, Host, URL string
				Live           bool
				Certificate    struct{ State, Issuer string }
			}
			Zone struct {
				Name        string
				Nameservers []string
				Records     []struct{ Name, Type, Value, State string }
			}
		} `json:"front_door"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/deployments/"+d.ID, nil, &status))
	fd := status.FrontDoor
	require.Len(t, fd.Apps, 1)
	require.Equal(t, url, fd.Apps[0].URL)
	require.True(t, fd.Apps[0].Live)
	require.Equal(t, "valid", fd.Apps[0].Certificate.State)
	require.Contains(t, fd.Apps[0].Certificate.Issuer, "Pebble")
	require.Equal(t, "acme.test", fd.Zone.Name)
	require.NotEmpty(t, fd.Zone.Nameservers)
	require.Len(t, fd.Zone.Records, 1)
	require.Equal(t, "A", fd.Zone.Records[0].Type)
	require.Equal(t, "127.0.0.1", fd.Zone.Records[0].Value)
	require.Equal(t, "published", fd.Zone.Records[0].State)

	// curl, as a person would, with pebble's root and the name resolved to loopback.
	if curl, err := exec.LookPath("curl"); err == nil {
		rootFile := filepath.Join(t.TempDir(), "pebble-root.pem")
		require.NoError(t, os.WriteFile(rootFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.root.Raw}), 0o644))
		out, err := exec.Command(curl, "-sS", "--http2", "--resolve", fmt.Sprintf("feeds.acme.test:%d:127.0.0.1", h.httpsPort),
			"--cacert", rootFile, "-o", "/dev/null", "-w", "%{http_code} %{http_version}", url).CombinedOutput()
		require.NoError(t, err, "curl: %s", out)
		require.Equal(t, "200 2", strings.TrimSpace(string(out)), "curl gets the page over HTTP/2")
	} else {
		t.Log("no curl on PATH: the Go client alone fetched the page")
	}

	// Plain HTTP is sent to HTTPS.
	resp, err := (&http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return net.Dial(network, "127.0.0.1:"+strconv.Itoa(h.httpPort))
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}).Get(fmt.Sprintf("http://feeds.acme.test:%d/", h.httpPort))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusPermanentRedirect, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "https://feeds.acme.test"), resp.Header.Get("Location"))

	// A second submit changes nothing and issues no certificate.
	again := h.wait(h.submit(d.ID, minifluxConfig("acme.test", nil)).ID)
	require.Equal(t, "succeeded", again.State)
	if time.Since(issuedAt) < renewAfter {
		require.Equal(t, serial, f.signInPage(t, url, 10*time.Second), "the same certificate")
	}

	// Another deployment takes neither the domain nor a name under it.
	beta := h.create("beta")
	for _, domain := range []string{"acme.test", "x.acme.test"} {
		var refusal apiError
		require.Equal(t, http.StatusConflict, h.call("POST", "/deployments/"+beta.ID+"/submit", minifluxConfig(domain, nil), &refusal), domain)
		require.Equal(t, "/domain", refusal.Error.Location)
	}

	// Chromium, its resolver mapping the name to loopback, trusting pebble's root key.
	browserShowsSignIn(t, h, url, f.servedChain(t))

	// Caddy killed: the provider starts it again and the route comes back.
	pidFile := filepath.Join(h.dataDir, "plugins", "caddy", "caddy", "caddy.pid")
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the managed Caddy's pid file")
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	f.signInPage(t, url, 60*time.Second)
	t.Logf("route back %s after Caddy was killed", time.Since(killed).Round(time.Millisecond))

	// The certificate falls due: the scheduler renews it and the new one is served.
	deadline := issuedAt.Add(renewAfter + 3*time.Minute)
	renewed := ""
	for time.Now().Before(deadline) {
		if _, _, _, s, err := f.get(url); err == nil && s != "" && s != serial {
			renewed = s
			break
		}
		time.Sleep(time.Second)
	}
	require.NotEmpty(t, renewed, "the scheduler renewed the certificate and the front door serves it (log:\n%s)", h.log)
	t.Logf("certificate renewed %s after it fell due", time.Since(issuedAt.Add(renewAfter)).Round(time.Second))
	var events []struct {
		Action       string `json:"action"`
		Actor        string `json:"actor"`
		DeploymentID string `json:"deployment_id"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/audit-events?limit=1000", nil, &events))
	audited := false
	for _, e := range events {
		audited = audited || (e.Action == "certificate_renewal" && e.DeploymentID == d.ID)
	}
	require.True(t, audited, "the scheduler's renewal is audited")

	// The host restarted: the routes are back.
	h.stop()
	restarted := time.Now()
	h.start()
	f.signInPage(t, url, 60*time.Second)
	t.Logf("route back %s after the host restarted", time.Since(restarted).Round(time.Millisecond))
}

// servedChain is the chain the front door serves for feeds.acme.test, verified against
// pebble's root.
func (f *frontDoor) servedChain(t *testing.T) []*x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(f.root)
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(f.h.httpsPort), &tls.Config{ServerName: "feeds.acme.test", RootCAs: pool})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates
}

// browserShowsSignIn opens url in headless Chromium, whose resolver maps every name to
// loopback and which trusts the keys of chain (Chromium takes an exception only for a
// key of a certificate the server presents; pebble's root is not presented), and checks
// the page.
func browserShowsSignIn(t *testing.T, h *host, url string, chain []*x509.Certificate) {
	t.Helper()
	var keys []string
	for _, c := range chain {
		spki := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		keys = append(keys, base64.StdEncoding.EncodeToString(spki[:]))
	}
	b := newBrowser(t, h,
		chromedp.Flag("host-resolver-rules", "MAP *.acme.test 127.0.0.1"),
		chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(keys, ",")),
	)
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(url))
	require.NoError(t, err, "opening %s", url)
	require.Equal(t, int64(200), resp.Status)
	title, err := chromedp.Run(b.ctx, chromedp.Title())
	require.NoError(t, err)
	require.Equal(t, "Sign In - Miniflux", title)
	b.screenshot("miniflux-through-the-front-door")
}
