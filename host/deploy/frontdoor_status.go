package deploy

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// Certificate states, as the deployment page, the API and the CLI show them.
const (
	CertificateValid         = "valid"
	CertificateRenewalDue    = "renewal due"
	CertificateRenewalFailed = "renewal failed"
	CertificateExpired       = "expired"
	CertificatePending       = "pending"
)

// Record states: published by the dns provider, not yet, or the operator's to create
// when no dns provider is configured.
const (
	RecordPublished = "published"
	RecordPending   = "pending"
	RecordManual    = "create it at your DNS host"
)

// renewBefore is how long before its expiry a certificate whose provider says nothing
// of it is renewed (issue 11: 30 days).
const renewBefore = 30 * 24 * time.Hour

// FrontDoorStatus is how people reach a deployment's apps: each app's URL and
// certificate, and the zone of the deployment's domain. It holds nothing secret.
type FrontDoorStatus struct {
	Apps []AppFrontDoor `json:"apps"`
	Zone *ZoneStatus    `json:"zone,omitempty"`
}

// AppFrontDoor is one app's place at the front door; App is empty for the deployment's
// sign-in (its OpenID provider at auth.<domain>).
type AppFrontDoor struct {
	App  string `json:"app"`
	Host string `json:"host"`
	URL  string `json:"url"`
	// Live is set when the front door routes the host name and the deployment is active
	// (or failed: a failed build leaves the routes as they were).
	Live bool `json:"live"`
	// Certificate is nil when no tls provider is configured (the URL is http).
	Certificate *CertificateStatus `json:"certificate,omitempty"`
}

// CertificateStatus is where an app's certificate stands.
type CertificateStatus struct {
	// State is valid, renewal due, renewal failed, expired or pending (before the first).
	State      string     `json:"state"`
	Issuer     string     `json:"issuer,omitempty"`
	NotAfter   *time.Time `json:"not_after,omitempty"`
	RenewAfter *time.Time `json:"renew_after,omitempty"`
	// FailedBuildID is the renewal build that failed since the certificate was due; the
	// old certificate stays served.
	FailedBuildID string `json:"failed_build_id,omitempty"`
}

// ZoneStatus is the zone of the deployment's domain and the records the apps need in it.
type ZoneStatus struct {
	Name string `json:"name"`
	// Local is set for a domain under .localhost, which needs no record: resolvers answer
	// its names with loopback.
	Local bool `json:"local"`
	// Managed is set when a dns provider serves the zone; without one the operator
	// creates the records at their own DNS host.
	Managed bool `json:"managed"`
	// Nameservers are the servers to delegate the domain to, once the provider serves it.
	Nameservers []string       `json:"nameservers,omitempty"`
	Records     []RecordStatus `json:"records"`
}

// RecordStatus is one record an app's host name needs; Name is fully qualified.
type RecordStatus struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
	State string `json:"state"`
}

// FrontDoor returns where the front door of d stands: empty when the environment names
// no route provider or no app has a host name.
func (e *Engine) FrontDoor(ctx context.Context, d store.Deployment) (FrontDoorStatus, error) {
	if !e.has(contract.Route) {
		return FrontDoorStatus{Apps: []AppFrontDoor{}}, nil
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return FrontDoorStatus{}, err
	}
	var builds []store.Build
	if e.has(contract.TLS) {
		if builds, err = e.opts.Store.ListBuilds(ctx, d.ID, RecentBuilds); err != nil {
			return FrontDoorStatus{}, err
		}
	}
	return e.FrontDoorFrom(ctx, d, rows, builds)
}

// FrontDoorFrom is FrontDoor from what a page of the deployment has read already: its
// resource rows and its RecentBuilds newest builds, newest first.
func (e *Engine) FrontDoorFrom(ctx context.Context, d store.Deployment, rows []store.Resource, builds []store.Build) (FrontDoorStatus, error) {
	if !e.has(contract.Route) {
		return FrontDoorStatus{Apps: []AppFrontDoor{}}, nil
	}
	hosts, err := e.HostNames(ctx, d)
	if err != nil || len(hosts) == 0 {
		return FrontDoorStatus{Apps: []AppFrontDoor{}}, err
	}
	for _, r := range rows {
		if r.Name == authRouteInstance || r.Name == authTLSInstance {
			// The deployment's sign-in, shown as an app without a name.
			hosts = maps.Clone(hosts)
			hosts[""] = authLabel + "." + d.Domain
			break
		}
	}
	return e.frontDoorOf(d, hosts, rows, builds, e.now()), nil
}

// frontDoorOf is the front door of d's apps' host names (by app) as its rows and newest
// builds tell at now.
func (e *Engine) frontDoorOf(d store.Deployment, hosts map[string]string, rows []store.Resource, builds []store.Build, now time.Time) FrontDoorStatus {
	out := FrontDoorStatus{Apps: []AppFrontDoor{}}
	byName := make(map[string]store.Resource, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	for _, app := range sortedKeys(hosts) {
		a := AppFrontDoor{App: app, Host: hosts[app], URL: e.publicURL(hosts[app])}
		routeName, tlsName := app+"-route", app+"-tls"
		if app == "" {
			routeName, tlsName = authRouteInstance, authTLSInstance
		}
		route, ok := byName[routeName]
		// A failed build leaves the routes as they were: they are served all the same.
		a.Live = ok && route.State == store.ResourceProvisioned && (d.State == StateActive || d.State == StateFailed)
		if e.has(contract.TLS) {
			c := certificateStatus(byName[tlsName], now, builds)
			a.Certificate = &c
		}
		out.Apps = append(out.Apps, a)
	}
	out.Zone = e.zoneStatus(d.Domain, hosts, byName[domainDNS])
	return out
}

// RecentBuilds is how many of a deployment's newest builds are read to find its last
// deploy: enough for the backups that may run between two deploys.
const RecentBuilds = 20

// certificateStatus reads a tls row: pending while it holds no certificate.
func certificateStatus(row store.Resource, now time.Time, builds []store.Build) CertificateStatus {
	c, ok := readCertificate(row)
	if !ok {
		return CertificateStatus{State: CertificatePending}
	}
	out := CertificateStatus{State: CertificateValid, Issuer: c.issuer, NotAfter: &c.notAfter, RenewAfter: &c.renewAfter}
	if now.Before(c.renewAfter) {
		return out
	}
	if b, ok := lastDeploy(builds); ok && !b.CreatedAt.Before(c.renewAfter) && b.State == store.BuildFailed {
		out.State, out.FailedBuildID = CertificateRenewalFailed, b.ID
	} else {
		out.State = CertificateRenewalDue
	}
	if !now.Before(c.notAfter) {
		out.State = CertificateExpired
	}
	return out
}

// certificate is what the host reads of a tls row's result.
type certificate struct {
	host                 string
	issuer               string
	notAfter, renewAfter time.Time
}

// readCertificate reads a provisioned tls row. A result without issuer or renew_after
// (a provider older than those fields) is completed from the certificate itself: its
// issuer's common name, and 30 days before it expires.
func readCertificate(row store.Resource) (certificate, bool) {
	if row.Type != contract.TLS || row.State != store.ResourceProvisioned {
		return certificate{}, false
	}
	var res contract.TLSResult
	if json.Unmarshal([]byte(row.Result), &res) != nil || res.Certificate == "" {
		return certificate{}, false
	}
	var req contract.TLSRequest
	_ = json.Unmarshal([]byte(row.Spec), &req)
	c := certificate{issuer: res.Issuer}
	if len(req.Domains) > 0 {
		c.host = shown(req.Domains[0], 253)
	}
	notAfter, nerr := time.Parse(time.RFC3339, res.NotAfter)
	renewAfter, rerr := time.Parse(time.RFC3339, res.RenewAfter)
	if nerr != nil || rerr != nil || c.issuer == "" {
		leaf := leafOf(res.Certificate)
		if leaf == nil && nerr != nil {
			return certificate{}, false
		}
		if leaf != nil {
			if nerr != nil {
				notAfter = leaf.NotAfter
			}
			if c.issuer == "" {
				c.issuer = leaf.Issuer.CommonName
			}
		}
		if rerr != nil {
			renewAfter = notAfter.Add(-renewBefore)
		}
	}
	c.issuer = shown(c.issuer, 200)
	c.notAfter, c.renewAfter = notAfter.UTC(), renewAfter.UTC()
	return c, true
}

// leafOf parses the first certificate of a PEM chain; nil when there is none.
func leafOf(chain string) *x509.Certificate {
	block, _ := pem.Decode([]byte(chain))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return leaf
}

// lastDeploy is the newest deploy build of builds (newest first).
func lastDeploy(builds []store.Build) (store.Build, bool) {
	for _, b := range builds {
		if b.Operation == store.OperationDeploy {
			return b, true
		}
	}
	return store.Build{}, false
}

// zoneStatus gives the records the apps' host names need and where each stands: as the
// dns row publishes them, or the operator's to create when no dns provider is configured.
func (e *Engine) zoneStatus(domain string, hosts map[string]string, row store.Resource) *ZoneStatus {
	if domain == "" {
		return nil
	}
	z := &ZoneStatus{Name: shown(domain, 253), Local: localDomain(domain), Managed: e.has(contract.DNS), Records: []RecordStatus{}}
	if z.Local {
		return z
	}
	var served contract.DNSResult
	provisioned := row.Type == contract.DNS && row.State == store.ResourceProvisioned &&
		json.Unmarshal([]byte(row.Result), &served) == nil
	if provisioned {
		for _, ns := range served.Nameservers {
			// As registrars take them: without the root's dot.
			z.Nameservers = append(z.Nameservers, shown(strings.TrimSuffix(ns, "."), 253))
		}
	}
	for _, r := range e.DNSRecords(domain, hosts) {
		state := RecordManual
		if z.Managed {
			state = RecordPending
			if provisioned && slices.ContainsFunc(served.Records, func(s contract.DNSRecord) bool {
				return strings.EqualFold(s.Name, r.Name) && strings.EqualFold(s.Type, r.Type) && s.Value == r.Value
			}) {
				state = RecordPublished
			}
		}
		z.Records = append(z.Records, RecordStatus{Name: fqdn(r.Name, domain), Type: r.Type, Value: shown(r.Value, 253), State: state})
	}
	return z
}

// fqdn is a record name relative to zone made whole.
func fqdn(name, zone string) string {
	if name == "@" || name == "" {
		return zone
	}
	return name + "." + zone
}

// shown bounds a string a provider gave to max bytes of printable text, for a page.
func shown(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if input.Unsafe(r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
