package e2e

import (
	"bytes"
	"crypto/x509"
	"encoding/csv"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/internal/bindtest"
	"github.com/fedhost/fedhost/internal/porkbuntest"
)

// registrarHost is a host whose deployments' zones are on a real BIND (rfc2136) and whose
// registrar is the porkbun driver against porkbuntest, the Porkbun-shaped server.
type registrarHost struct {
	*frontDoor
	porkbun *porkbuntest.Server
}

// porkbunTimeout is the driver's timeout_seconds in the test: a call that hangs longer
// fails the build's domain step.
const porkbunTimeout = 3 * time.Second

func startRegistrarHost(t *testing.T) *registrarHost {
	t.Helper()
	dir, err := os.MkdirTemp("", "fedhost-e2e-registrar-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bind"), 0o755))
	bind, stopBind, err := bindtest.Start(filepath.Join(dir, "bind"))
	require.NoError(t, err)
	t.Cleanup(stopBind)
	pb := porkbuntest.Start(porkbuntest.Options{})
	t.Cleanup(pb.Close)
	keyFile, secretFile := filepath.Join(dir, "porkbun-api-key"), filepath.Join(dir, "porkbun-secret-api-key")
	require.NoError(t, os.WriteFile(keyFile, []byte(pb.APIKey+"\n"), 0o600))
	require.NoError(t, os.WriteFile(secretFile, []byte(pb.SecretKey+"\n"), 0o600))

	// The snapshot job runs at the scheduler's tick once domain_snapshot_interval has
	// passed: 2s and 3s here instead of 1m and a day, so that the renewal of a domain
	// that falls due is seen within seconds. The driver sends no call twice (retries = 0),
	// so that one fault of porkbuntest fails one build.
	hcl := fmt.Sprintf(`
update_check_interval      = "2s"
domain_snapshot_interval   = "3s"
domain_delegation_resolver = %q
front_door_addresses       = "127.0.0.1"

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
resource "tls" { provider = "localca" }
resource "route" {
  provider = "caddy"
  settings = { managed = true, listen = "127.0.0.1" }
}

registrar "porkbun" {
  settings = {
    api_key_file        = %q
    secret_api_key_file = %q
    base_url            = %q
    timeout_seconds     = %d
    retries             = 0
  }
}
`, bind.DNSAddr, bind.DNSAddr, bind.ControlPort, bind.RNDCKeyFile, bind.KeysFile, bind.ZonesDir,
		keyFile, secretFile, pb.URL, int(porkbunTimeout.Seconds()))
	path := filepath.Join(dir, "fedhost.hcl")
	require.NoError(t, os.WriteFile(path, []byte(hcl), 0o600))
	h := startHost(t, "FEDHOST_CONFIG="+path, "FEDHOST_PLUGIN_DIR="+pluginDirWithPorkbun(t, filepath.Join(dir, "plugins")))
	return &registrarHost{frontDoor: &frontDoor{h: h, bind: bind}, porkbun: pb}
}

// pluginDirWithPorkbun is the harness's plugin directory (hard links to its binaries,
// and its artifacts beside it) with the porkbun registrar driver added and locked: the other e2e tests run without a
// registrar, as their fedhost.hcl names none.
func pluginDirWithPorkbun(t *testing.T, dir string) string {
	t.Helper()
	require.NoError(t, os.Mkdir(dir, 0o755))
	// Providers look for their executables (caddy, versitygw) in artifacts/ beside it.
	require.NoError(t, os.Symlink(filepath.Join(binDir, "artifacts"), filepath.Join(filepath.Dir(dir), "artifacts")))
	entries, err := os.ReadDir(filepath.Join(binDir, "plugins"))
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() == "plugins.lock" || e.IsDir() {
			continue
		}
		require.NoError(t, os.Link(filepath.Join(binDir, "plugins", e.Name()), filepath.Join(dir, e.Name())))
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "fedhost-registrar-porkbun"), "./plugins/registrars/porkbun")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build porkbun: %s", out)
	lock := exec.Command(filepath.Join(binDir, "fedhost"), "plugins", "lock")
	lock.Env = append(os.Environ(), "FEDHOST_PLUGIN_DIR="+dir)
	out, err = lock.CombinedOutput()
	require.NoError(t, err, "plugins lock: %s", out)
	return dir
}

// trustLocalCA makes the front door's client trust the host's local CA (the localca tls
// provider's root, made at its first certificate).
func (r *registrarHost) trustLocalCA(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(r.h.dataDir, "plugins", "localca", "ca.pem"))
	require.NoError(t, err, "the local CA's root")
	block, _ := pem.Decode(raw)
	require.NotNil(t, block, "the local CA's root is PEM")
	root, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	r.root = root
}

// getNs asks porkbuntest, through its API as the driver does, for a domain's nameservers.
func (r *registrarHost) getNs(t *testing.T, domain string) []string {
	t.Helper()
	body, err := json.Marshal(map[string]string{"apikey": r.porkbun.APIKey, "secretapikey": r.porkbun.SecretKey})
	require.NoError(t, err)
	resp, err := http.Post(r.porkbun.URL+"/domain/getNs/"+domain, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer struct {
		Status string   `json:"status"`
		NS     []string `json:"ns"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.Equal(t, "SUCCESS", answer.Status)
	return answer.NS
}

type domainRecord struct {
	Name        string     `json:"name"`
	Mode        string     `json:"mode"`
	Registrar   string     `json:"registrar"`
	State       string     `json:"state"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Nameservers []string   `json:"nameservers"`
	PriceMicros int64      `json:"price_micros"`
	Currency    string     `json:"currency"`
	Message     string     `json:"message"`
	Events      []struct {
		Kind       string `json:"kind"`
		CostMicros int64  `json:"cost_micros"`
		Currency   string `json:"currency"`
		Detail     string `json:"detail"`
	} `json:"events"`
}

func (r *registrarHost) domain(t *testing.T, deploymentID string) domainRecord {
	t.Helper()
	var d domainRecord
	require.Equal(t, http.StatusOK, r.h.call("GET", "/deployments/"+deploymentID+"/domain", nil, &d))
	return d
}

func (r *registrarHost) confirm(t *testing.T, deploymentID, domain, contactID string, priceMicros int64, currency string) domainRecord {
	t.Helper()
	var d domainRecord
	code := r.h.call("POST", "/deployments/"+deploymentID+"/domain/register", map[string]any{"registrar": "porkbun", "domain": domain,
		"contact_id": contactID, "price_micros": priceMicros, "currency": currency}, &d)
	require.Equal(t, http.StatusAccepted, code, "confirm: %+v", d)
	return d
}

type quote struct {
	Available          bool   `json:"available"`
	PriceMicros        int64  `json:"price_micros"`
	Currency           string `json:"currency"`
	RenewalPriceMicros int64  `json:"renewal_price_micros"`
}

func (r *registrarHost) check(t *testing.T, domain string) quote {
	t.Helper()
	var q quote
	require.Equal(t, http.StatusOK, r.h.call("POST", "/domains/check", map[string]string{"registrar": "porkbun", "domain": domain}, &q))
	return q
}

func nameserverSet(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.TrimSuffix(strings.ToLower(s), ".")
	}
	return out
}

// An operator registers acme.test through the porkbun driver: the check shows the price,
// the confirmation is kept, the build registers the domain, its zone answers on BIND and
// the registrar's nameservers are the provider's. Porkbuntest then ages the domain so
// that it expires within 30 days (an account's real expiry, not the host's clock): the
// snapshot job renews it at the renewal price. The usage API, JSON and CSV, shows the
// registration and the renewal with their quoted costs and Miniflux's period.
//
// Then the registrar fails: porkbuntest answering 503 to the create, and later hanging
// past the driver's timeout on the check before it, fails a build at the domain step with unavailable while the Miniflux
// already running answers on; the same confirmation given twice and the failed builds
// register beta.test once, by the later build that completes.
func TestRegistrarPorkbunRegistersRenewsAndFails(t *testing.T) {
	r := startRegistrarHost(t)
	h := r.h
	began := time.Now()

	var contact struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, h.call("POST", "/contacts", map[string]string{"name": "Ada Acme", "email": "hostmaster@acme.test",
		"phone": "+4930123456", "street": "Acmestraße 1", "city": "Berlin", "postal_code": "10115", "country": "DE"}, &contact))
	require.NotEmpty(t, contact.ID)

	// The operator sees the price (as fedhost domains check prints it) and confirms it.
	out := h.cli("domains", "check", "acme.test", "--registrar", "porkbun")
	require.Contains(t, out, "acme.test is available at porkbun for 9.73 USD a year (renewal 10.81 USD)")
	q := r.check(t, "acme.test")
	require.True(t, q.Available)
	require.Equal(t, quote{Available: true, PriceMicros: 9_730_000, Currency: "USD", RenewalPriceMicros: 10_810_000}, q)
	acme := h.create("acme")
	confirmed := r.confirm(t, acme.ID, "acme.test", contact.ID, q.PriceMicros, q.Currency)
	require.Equal(t, "confirmed", confirmed.State)
	require.Zero(t, r.porkbun.Creates(), "a confirmation registers nothing before the build")

	submitted := time.Now()
	b := h.wait(h.submit(acme.ID, minifluxConfig("acme.test", nil)).ID)
	require.Equal(t, "succeeded", b.State, "events: %+v\nlog:\n%s", b.Events, h.log)
	t.Logf("first build with the registration: %s", time.Since(submitted).Round(time.Millisecond))
	registering := false
	for _, e := range b.Events {
		registering = registering || (e.Step == "domain" && strings.Contains(e.Message, "registering acme.test at porkbun for 9.73 USD"))
	}
	require.True(t, registering, "the build says what it registers and at which price: %+v", b.Events)
	require.Equal(t, 1, r.porkbun.Creates())
	require.EqualValues(t, 973, r.porkbun.Charged(), "the account paid the quoted price, in cents")

	// The zone is on BIND, and the registrar delegates the domain to its nameservers.
	require.ElementsMatch(t, []string{"ns1.provider.test.", "ns2.provider.test."}, r.lookup(t, "acme.test", dns.TypeNS))
	require.Equal(t, []string{"127.0.0.1"}, r.lookup(t, "feeds.acme.test", dns.TypeA))
	require.ElementsMatch(t, []string{"ns1.provider.test", "ns2.provider.test"}, nameserverSet(r.getNs(t, "acme.test")))
	d := r.domain(t, acme.ID)
	require.Equal(t, "registered", d.Mode)
	require.Equal(t, "active", d.State)
	require.ElementsMatch(t, []string{"ns1.provider.test", "ns2.provider.test"}, nameserverSet(d.Nameservers))
	require.NotNil(t, d.ExpiresAt)
	require.WithinDuration(t, time.Now().AddDate(1, 0, 0), *d.ExpiresAt, 48*time.Hour)
	r.trustLocalCA(t)
	acmeURL := fmt.Sprintf("https://feeds.acme.test:%d/", h.httpsPort)
	r.signInPage(t, acmeURL, 30*time.Second)

	// The domain falls due: the snapshot job renews it, once, at the renewal price.
	require.True(t, r.porkbun.Age("acme.test", 340*24*time.Hour))
	aged := time.Now()
	var renewal *struct {
		Kind       string `json:"kind"`
		CostMicros int64  `json:"cost_micros"`
		Currency   string `json:"currency"`
		Detail     string `json:"detail"`
	}
	require.Eventually(t, func() bool {
		d = r.domain(t, acme.ID)
		for i, e := range d.Events {
			if e.Kind == "renewal" {
				renewal = &d.Events[i]
				return true
			}
		}
		return false
	}, 60*time.Second, 500*time.Millisecond, "the snapshot job renews the domain due within 30 days:\n%s", h.log)
	t.Logf("domain renewed %s after it fell due", time.Since(aged).Round(time.Millisecond))
	require.Equal(t, int64(10_810_000), renewal.CostMicros)
	require.Equal(t, "USD", renewal.Currency)
	require.Contains(t, renewal.Detail, "1 year(s), due ")
	require.EqualValues(t, 973+1081, r.porkbun.Charged(), "renewed once, at the renewal price")
	require.Eventually(t, func() bool {
		d = r.domain(t, acme.ID)
		return d.ExpiresAt != nil && d.ExpiresAt.After(time.Now().AddDate(1, 0, 0))
	}, 30*time.Second, 500*time.Millisecond, "the next snapshot records the new expiry: %+v", d)
	time.Sleep(4 * time.Second) // a snapshot or two more
	require.EqualValues(t, 973+1081, r.porkbun.Charged(), "a renewed domain is not renewed again")

	// Usage: the registration and the renewal with their costs, Miniflux's period.
	from, to := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly), time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly)
	var usage struct {
		Events []struct {
			DeploymentID string `json:"deployment_id"`
			Domain       string `json:"domain"`
			Registrar    string `json:"registrar"`
			Kind         string `json:"kind"`
			CostMicros   int64  `json:"cost_micros"`
			Currency     string `json:"currency"`
		} `json:"events"`
		Periods []struct {
			DeploymentID string    `json:"deployment_id"`
			App          string    `json:"app"`
			Start        time.Time `json:"start"`
			Ongoing      bool      `json:"ongoing"`
			Resources    []string  `json:"resources"`
		} `json:"periods"`
		Totals []struct {
			Currency   string `json:"currency"`
			CostMicros int64  `json:"cost_micros"`
		} `json:"totals"`
	}
	require.Equal(t, http.StatusOK, h.call("GET", "/usage?from="+from+"&to="+to, nil, &usage))
	costs := map[string]int64{}
	for _, e := range usage.Events {
		if e.Domain == "acme.test" && e.CostMicros > 0 {
			require.Equal(t, acme.ID, e.DeploymentID)
			require.Equal(t, "porkbun", e.Registrar)
			require.Equal(t, "USD", e.Currency)
			costs[e.Kind] += e.CostMicros
		}
	}
	require.Equal(t, map[string]int64{"registration": 9_730_000, "renewal": 10_810_000}, costs)
	require.Len(t, usage.Periods, 1)
	require.Equal(t, acme.ID, usage.Periods[0].DeploymentID)
	require.Equal(t, "miniflux", usage.Periods[0].App)
	require.True(t, usage.Periods[0].Ongoing)
	require.WithinDuration(t, time.Now(), usage.Periods[0].Start, time.Since(began))
	require.Contains(t, usage.Periods[0].Resources, "postgresql")
	require.Len(t, usage.Totals, 1)
	require.Equal(t, int64(9_730_000+10_810_000), usage.Totals[0].CostMicros)

	req, err := http.NewRequest("GET", "http://"+h.addr+"/api/v1/usage?format=csv&from="+from+"&to="+to, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/csv")
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, row := range rows[1:] {
		switch {
		case row[0] == "event" && row[4] == "acme.test" && row[5] == "registration":
			require.Equal(t, []string{"9730000", "USD"}, row[9:11])
			seen["registration"] = true
		case row[0] == "event" && row[4] == "acme.test" && row[5] == "renewal":
			require.Equal(t, []string{"10810000", "USD"}, row[9:11])
			seen["renewal"] = true
		case row[0] == "period" && row[3] == acme.ID && row[4] == "miniflux":
			seen["period"] = true
		}
	}
	require.Equal(t, map[string]bool{"registration": true, "renewal": true, "period": true}, seen, "CSV:\n%s", raw)

	// beta runs Miniflux on its own domain, delegated to the provider's nameservers: the
	// check through domain_delegation_resolver (BIND, which serves the zone) holds.
	beta := h.create("beta")
	b = h.wait(h.submit(beta.ID, minifluxConfig("beta.test", nil)).ID)
	require.Equal(t, "succeeded", b.State, "events: %+v", b.Events)
	d = r.domain(t, beta.ID)
	require.Equal(t, "delegated", d.Mode)
	require.Equal(t, "delegated", d.State, "the delegation holds on the resolver of domain_delegation_resolver: %+v", d)
	betaURL := fmt.Sprintf("https://feeds.beta.test:%d/", h.httpsPort)
	r.signInPage(t, betaURL, 30*time.Second)
	pid := h.nodePID("beta", "miniflux-web")

	// The operator has the provider register it after all, and confirms twice: one key.
	q = r.check(t, "beta.test")
	first := r.confirm(t, beta.ID, "beta.test", contact.ID, q.PriceMicros, q.Currency)
	again := r.confirm(t, beta.ID, "beta.test", contact.ID, q.PriceMicros, q.Currency)
	require.Equal(t, "confirmed", first.State)
	require.Equal(t, first, again, "the same confirmation again changes nothing")

	// Porkbun answers 503, then hangs past the driver's timeout: each build fails at the
	// domain step with unavailable, and Miniflux answers on, the same process.
	for _, fault := range []struct {
		name   string
		inject func()
	}{
		{"503", func() { r.porkbun.FailCall("domain/create", 1, http.StatusServiceUnavailable) }},
		{"hang", func() { r.porkbun.DelayCall("domain/checkDomain", 1, porkbunTimeout+5*time.Second) }},
	} {
		fault.inject()
		started := time.Now()
		b = h.wait(h.submit(beta.ID, minifluxConfig("beta.test", nil)).ID)
		require.Equal(t, "failed", b.State, "%s: events: %+v", fault.name, b.Events)
		t.Logf("build failed at the domain step (%s) in %s", fault.name, time.Since(started).Round(time.Millisecond))
		verdict := ""
		for _, e := range b.Events {
			if e.Step == "verdict" {
				verdict = e.Message
			}
		}
		require.True(t, strings.HasPrefix(verdict, "domain: unavailable: registrar porkbun did not answer"), "%s: %+v", fault.name, b.Events)
		require.NotContains(t, verdict, r.porkbun.APIKey)
		require.NotContains(t, verdict, r.porkbun.SecretKey)
		r.signInPage(t, betaURL, 10*time.Second)
		require.Equal(t, pid, h.nodePID("beta", "miniflux-web"), "%s: Miniflux kept running", fault.name)
		require.Equal(t, 1, r.porkbun.Creates(), "%s: nothing registered", fault.name)
		d = r.domain(t, beta.ID)
		require.Equal(t, "confirmed", d.State)
		require.Contains(t, d.Message, "did not answer")
	}

	// The registrar answers again: a later build registers beta.test, once.
	b = h.wait(h.submit(beta.ID, minifluxConfig("beta.test", nil)).ID)
	require.Equal(t, "succeeded", b.State, "events: %+v", b.Events)
	require.Equal(t, 2, r.porkbun.Creates(), "one registration for acme.test, one for beta.test")
	require.EqualValues(t, 973+1081+973, r.porkbun.Charged())
	d = r.domain(t, beta.ID)
	require.Equal(t, "registered", d.Mode)
	require.Equal(t, "active", d.State)
	require.ElementsMatch(t, []string{"ns1.provider.test", "ns2.provider.test"}, nameserverSet(r.getNs(t, "beta.test")))
	require.Equal(t, pid, h.nodePID("beta", "miniflux-web"), "the registration restarted nothing")
	regs := 0
	for _, e := range d.Events {
		if e.Kind == "registration" {
			regs++
		}
	}
	require.Equal(t, 1, regs, "one registration event: %+v", d.Events)

	// A confirmation once spent: a confirm again for the active domain is refused.
	var refusal apiError
	require.Equal(t, http.StatusConflict, h.call("POST", "/deployments/"+beta.ID+"/domain/register", map[string]any{"registrar": "porkbun",
		"domain": "beta.test", "contact_id": contact.ID, "price_micros": q.PriceMicros, "currency": q.Currency}, &refusal))
	require.Equal(t, "/domain", refusal.Error.Location)
	require.Equal(t, 2, r.porkbun.Creates())
}
