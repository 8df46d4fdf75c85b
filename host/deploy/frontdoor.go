package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk/contract"
)

// The front door puts each app that has a host name (x-hostname) on the web: the host,
// not the app, asks for what that takes, so every app gets it alike and an app author
// writes none of it. For a deployment whose environment has the providers:
//
//   - dns: one zone per deployment, the domain, with an A or AAAA record of each app host
//     name to each front door address (none for a domain under .localhost, which
//     resolvers answer with loopback, RFC 6761);
//   - tls: a certificate for each app host name, answering DNS-01 with the zone's update
//     key when the dns provider gives one;
//   - route: each app host name to the node port that serves HTTP, with its certificate,
//     once the node runs.
//
// A node's ${url:PORT} of the routed port becomes the app's public URL before the
// instance provider sees the spec. Without a route provider nothing of this is asked and
// apps answer on the addresses the instance provider gives.

// FrontDoor is where people reach the apps: the addresses the dns records point at and
// the ports the route provider listens on (fedhost.hcl's front_door_* settings).
type FrontDoor struct {
	Addresses []string
	HTTPSPort int
	HTTPPort  int
}

// domainDNS is the instance of the deployment's zone, which belongs to no app.
const domainDNS = "domain-dns"

// has reports whether the environment names a provider for typ.
func (e *Engine) has(typ string) bool {
	for _, r := range e.opts.Environment {
		if r.Type == typ && r.Provider != "" {
			return true
		}
	}
	return false
}

// frontDoorType reports whether rows of typ are the host's front door, which holds no
// data of an app: they are removed, not kept, when no longer asked for.
func frontDoorType(typ string) bool {
	return typ == contract.DNS || typ == contract.TLS || typ == contract.Route
}

// localDomain reports whether domain is under .localhost, which needs no DNS.
func localDomain(domain string) bool {
	return domain == "localhost" || strings.HasSuffix(domain, ".localhost")
}

// publicURL is the URL people use for host: https when a tls provider is configured.
func (e *Engine) publicURL(host string) string {
	scheme, port, standard := "https", e.opts.FrontDoor.HTTPSPort, 443
	if !e.has(contract.TLS) {
		scheme, port, standard = "http", e.opts.FrontDoor.HTTPPort, 80
	}
	if port != 0 && port != standard {
		return fmt.Sprintf("%s://%s/", scheme, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return scheme + "://" + host + "/"
}

// hostNames gives the host name of each enabled app of a configuration at revision.
func (e *Engine) hostNames(ctx context.Context, raw json.RawMessage, revision string) (map[string]string, error) {
	if e.opts.Catalog == nil || !e.has(contract.Route) {
		return nil, nil
	}
	cat, err := e.catalogAt(ctx, revision)
	if err != nil {
		return nil, err
	}
	hosts, _ := cat.HostNames(raw)
	return hosts, nil
}

// DNSRecords are the records each app host name needs at the front door's addresses,
// relative to the domain; none for a domain under .localhost.
func (e *Engine) DNSRecords(domain string, hosts map[string]string) []contract.DNSRecord {
	if localDomain(domain) {
		return nil
	}
	var out []contract.DNSRecord
	for _, app := range sortedKeys(hosts) {
		name := strings.TrimSuffix(hosts[app], "."+domain)
		for _, a := range e.opts.FrontDoor.Addresses {
			typ := "A"
			if ip := net.ParseIP(a); ip != nil && ip.To4() == nil {
				typ = "AAAA"
			}
			out = append(out, contract.DNSRecord{Name: name, Type: typ, Value: a, TTL: 300})
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// dnsStep is the deployment's zone, when a dns provider is configured and some app has a
// host name on a domain that needs DNS.
func (e *Engine) dnsStep(ctx context.Context, domain string, hosts map[string]string) (*step, error) {
	if len(hosts) == 0 || localDomain(domain) || !e.has(contract.DNS) {
		return nil, nil
	}
	records := e.DNSRecords(domain, hosts)
	if records == nil {
		records = []contract.DNSRecord{}
	}
	spec, _ := json.Marshal(contract.DNSRequest{Zone: domain, Records: records})
	s := &step{Name: domainDNS, Request: "dns", Type: contract.DNS, Spec: spec}
	var err error
	if s.client, s.Provider, err = e.route(contract.DNS); err != nil {
		return nil, fmt.Errorf("the domain's zone: %w", err)
	}
	if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
		return nil, fmt.Errorf("the domain's zone (dns by %s): %w", s.Provider, err)
	}
	return s, nil
}

// tlsStep is the certificate of an app's host name; dns is the zone as served (or as it
// stands in for it in a plan), whose update key answers DNS-01.
func (e *Engine) tlsStep(ctx context.Context, app, host string, dns *contract.DNSResult) (*step, error) {
	req := contract.TLSRequest{Domains: []string{host}}
	if dns != nil && dns.Update != nil {
		req.Challenge, req.DNS = "dns-01", dns.Update
	}
	spec, _ := json.Marshal(req)
	s := &step{App: app, Name: app + "-tls", Request: "tls", Type: contract.TLS, Spec: spec}
	var err error
	if s.client, s.Provider, err = e.route(contract.TLS); err != nil {
		return nil, fmt.Errorf("app %s, the certificate of %s: %w", app, host, err)
	}
	if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
		return nil, fmt.Errorf("app %s, the certificate of %s (tls by %s): %w", app, host, s.Provider, err)
	}
	return s, nil
}

// routeStep sends an app's host name to upstream with the certificate of tls (nil
// without a tls provider). It is validated when it is provisioned: its upstream is known
// only once the node runs.
func (e *Engine) routeStep(app, host, upstream string, tls *contract.TLSResult) (step, error) {
	req := contract.RouteRequest{Hosts: []string{host}, Upstream: upstream}
	if tls != nil {
		req.TLS = &contract.RouteTLS{Certificate: tls.Certificate, Key: tls.Key}
	}
	spec, _ := json.Marshal(req)
	s := step{App: app, Name: app + "-route", Request: "route", Type: contract.Route, Spec: spec}
	var err error
	if s.client, s.Provider, err = e.route(contract.Route); err != nil {
		return step{}, fmt.Errorf("app %s, the route of %s: %w", app, host, err)
	}
	return s, nil
}

// dnsPlaceholder stands in a plan for the zone's update key before the zone exists.
var dnsPlaceholder = &contract.DNSResult{Update: &contract.DNSUpdate{Server: "pending.invalid:53", KeyName: "pending.invalid.",
	Algorithm: "hmac-sha256", Secret: contract.SecretRef{Secret: "pending"}}}

// planFrontDoor adds the front door to a plan: the zone (returned), and each app's host
// name, URL and certificate. existing holds the results made before, by instance.
func (e *Engine) planFrontDoor(ctx context.Context, domain string, hosts map[string]string, plans []*appPlan, existing map[string]json.RawMessage) (*step, error) {
	for _, ap := range plans {
		if host, ok := hosts[ap.App.Name]; ok {
			ap.Host, ap.URL = host, e.publicURL(host)
		}
	}
	dns, err := e.dnsStep(ctx, domain, hosts)
	if err != nil {
		return nil, err
	}
	var zone *contract.DNSResult
	if dns != nil {
		zone = dnsPlaceholder
		if raw, ok := existing[domainDNS]; ok {
			var z contract.DNSResult
			if json.Unmarshal(raw, &z) == nil && z.Update != nil {
				zone = &z
			}
		}
	}
	if !e.has(contract.TLS) {
		return dns, nil
	}
	for _, ap := range plans {
		if ap.Host == "" {
			continue
		}
		if ap.TLS, err = e.tlsStep(ctx, ap.App.Name, ap.Host, zone); err != nil {
			return nil, err
		}
	}
	return dns, nil
}

// routeURL puts the app's URL for ${url:PORT} of the port the front door routes to: the
// first HTTP port of the app's first node that has one. It records the node and port.
func routeURL(ap *appPlan, nodes []step) {
	ap.routeNode, ap.routePort = "", ""
	if ap.URL == "" {
		return
	}
	for i := range nodes {
		var spec contract.InstanceRequest
		if json.Unmarshal(nodes[i].Spec, &spec) != nil {
			continue
		}
		for _, p := range spec.Ports {
			if p.Protocol == "http" {
				ap.routeNode, ap.routePort = nodes[i].Name, p.Name
				break
			}
		}
		if ap.routeNode != "" {
			break
		}
	}
	if ap.routePort == "" {
		return
	}
	placeholder := []byte("${url:" + ap.routePort + "}")
	url, _ := json.Marshal(ap.URL)
	url = url[1 : len(url)-1] // the URL as it stands inside a JSON string
	for i := range nodes {
		nodes[i].Spec = bytes.ReplaceAll(nodes[i].Spec, placeholder, url)
	}
}

// urlInRequests puts the app's URL for ${url:PORT} of the routed port in its oidc
// requests too: a redirect address is the app's public URL, which only the host knows.
func urlInRequests(ap *appPlan) {
	if ap.URL == "" || ap.routePort == "" {
		return
	}
	placeholder := []byte("${url:" + ap.routePort + "}")
	url, _ := json.Marshal(ap.URL)
	url = url[1 : len(url)-1]
	for i := range ap.Steps {
		if ap.Steps[i].Type == contract.OIDC {
			ap.Steps[i].Spec = bytes.ReplaceAll(ap.Steps[i].Spec, placeholder, url)
		}
	}
}

// specRefs are the secrets of other resources a front door or sign-in step's spec names.
func specRefs(s step) []string {
	switch s.Type {
	case contract.TLS:
		var req contract.TLSRequest
		if json.Unmarshal(s.Spec, &req) == nil && req.DNS != nil {
			return []string{req.DNS.Secret.Secret}
		}
	case contract.Route:
		var req contract.RouteRequest
		if json.Unmarshal(s.Spec, &req) == nil && req.TLS != nil {
			return []string{req.TLS.Key.Secret}
		}
	case contract.OIDC:
		return oidcRefs(s.Spec)
	}
	return nil
}
