package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fedhost/fedhost/sdk/contract"
)

// Each deployment has its own directory and, for the apps that sign people in through
// it, its own OpenID provider: the host, not the app, asks for them, so that every app of
// a deployment shares one directory of users and one sign-in. For a deployment whose
// environment has the providers:
//
//   - ldap: the deployment's directory, the row "directory" (it belongs to no app and
//     holds the operator's users: like an app's data it is kept, not removed, when no
//     longer asked for, and goes only with the deployment), with the role groups of the
//     enabled apps and the groups their sign-ins allow;
//   - oidc: each app's oidc request is completed with the deployment's issuer,
//     https://auth.<domain>/, and its directory, against which the provider signs users in;
//   - tls and route: the issuer's host name gets a certificate ("auth-tls") and the front
//     door routes it to the provider ("auth-route"), once the provider says where it
//     listens; its DNS record joins the apps' in the deployment's zone.
//
// The nodes of an app that signs in through the provider call the issuer; when its
// certificate comes from a private CA (the embedded default's localca), they are given
// that CA's root in a file named by SSL_CERT_FILE, which Go, OpenSSL and most runtimes
// read, beside the system's roots.

// The instances of a deployment's identity, which belong to no app.
const (
	directoryInstance = DirectoryResource
	authTLSInstance   = "auth-tls"
	authRouteInstance = "auth-route"
	// authLabel is the issuer's host name under the domain; the catalog refuses it as an
	// app's host name.
	authLabel = "auth"
	// trustFile is the node file holding a private CA's root.
	trustFile = "fedhost-front-door-ca.pem"
)

// identity is the deployment-wide part of a plan: its directory and, when an app signs
// in through it, the issuer's host name, URL and certificate.
type identity struct {
	Directory *step
	// Mail is the deployment's mail account (mail.go), nil without an smtp provider.
	Mail *step
	// Issuer is empty when no enabled app asks for oidc.
	AuthHost, Issuer string
	AuthTLS          *step
}

// sso reports whether some enabled app signs in through the deployment's provider.
func (id *identity) sso() bool { return id != nil && id.Issuer != "" }

// directoryGroups are the groups a deployment's directory holds: each enabled app's role
// groups and the groups its sign-ins allow.
func (e *Engine) directoryGroups(ctx context.Context, plans []*appPlan) ([]string, error) {
	var groups []string
	for _, ap := range plans {
		c, err := ap.App.Plugin.Client()
		if err != nil {
			return nil, err
		}
		rgs, err := c.App().RoleGroups(ctx)
		if err != nil {
			return nil, fmt.Errorf("app %s: role groups: %w", ap.App.Name, err)
		}
		for _, g := range rgs {
			groups = append(groups, g.Name)
		}
		for _, s := range ap.Steps {
			if s.Type != contract.OIDC {
				continue
			}
			var req contract.OIDCRequest
			if err := json.Unmarshal(s.Spec, &req); err != nil {
				return nil, fmt.Errorf("app %s, request %s: %w", ap.App.Name, s.Request, err)
			}
			groups = append(groups, req.AllowedGroups...)
		}
	}
	slices.Sort(groups)
	return slices.Compact(groups), nil
}

// planIdentity adds the deployment's directory and issuer to a plan, and completes each
// app's oidc request with them. existing holds the results made before, by instance; a
// directory or certificate not made yet is stood in for, as stubResults does.
func (e *Engine) planIdentity(ctx context.Context, domain string, plans []*appPlan, existing map[string]json.RawMessage) (*identity, error) {
	id := &identity{}
	if e.has(contract.LDAP) {
		groups, err := e.directoryGroups(ctx, plans)
		if err != nil {
			return nil, err
		}
		if groups == nil {
			groups = []string{}
		}
		spec, _ := json.Marshal(contract.LDAPRequest{Groups: groups})
		s := &step{Name: directoryInstance, Request: directoryInstance, Type: contract.LDAP, Spec: spec}
		if s.client, s.Provider, err = e.route(contract.LDAP); err != nil {
			return nil, fmt.Errorf("the deployment's directory: %w", err)
		}
		if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
			return nil, fmt.Errorf("the deployment's directory (ldap by %s): %w", s.Provider, err)
		}
		id.Directory = s
	}
	var err error
	if id.Mail, err = e.planMail(ctx, domain); err != nil {
		return nil, err
	}
	asks := false
	for _, ap := range plans {
		for _, s := range ap.Steps {
			asks = asks || s.Type == contract.OIDC
		}
	}
	if !asks {
		return id, nil
	}
	if id.Directory == nil {
		return nil, fmt.Errorf("an app signs in through the deployment's OpenID provider, which needs the deployment's directory: add a resource \"ldap\" block to fedhost.hcl")
	}
	id.AuthHost = authLabel + "." + domain
	id.Issuer = e.publicURL(id.AuthHost)
	directory := stubResults([]step{*id.Directory}, existing)[directoryInstance]
	for _, ap := range plans {
		for i := range ap.Steps {
			s := &ap.Steps[i]
			if s.Type != contract.OIDC {
				continue
			}
			spec, err := completeOIDC(s.Spec, id.Issuer, directory)
			if err != nil {
				return nil, fmt.Errorf("app %s, request %s: %w", ap.App.Name, s.Request, err)
			}
			s.Spec = spec
			if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
				return nil, fmt.Errorf("app %s, request %s (%s by %s): %w", ap.App.Name, s.Request, s.Type, s.Provider, err)
			}
		}
	}
	if e.has(contract.Route) && e.has(contract.TLS) {
		var zone *contract.DNSResult
		if raw, ok := existing[domainDNS]; ok {
			zone = &contract.DNSResult{}
			if json.Unmarshal(raw, zone) != nil || zone.Update == nil {
				zone = nil
			}
		}
		if zone == nil && e.has(contract.DNS) && !localDomain(domain) {
			zone = dnsPlaceholder
		}
		var err error
		if id.AuthTLS, err = e.tlsStep(ctx, "", id.AuthHost, zone); err != nil {
			return nil, err
		}
		id.AuthTLS.Name = authTLSInstance
	}
	return id, nil
}

// completeOIDC sets an app's oidc request's issuer and directory (an ldap result), which
// are the host's to say.
func completeOIDC(spec json.RawMessage, issuer string, directory json.RawMessage) (json.RawMessage, error) {
	var req contract.OIDCRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return nil, err
	}
	var dir contract.LDAPResult
	if err := json.Unmarshal(directory, &dir); err != nil {
		return nil, fmt.Errorf("the deployment's directory: %w", err)
	}
	req.Issuer, req.Directory = issuer, &dir
	return json.Marshal(req)
}

// authRouteStep sends the issuer's host name to where the provider listens.
func (e *Engine) authRouteStep(id *identity, upstream string, cert *contract.TLSResult) (step, error) {
	s, err := e.routeStep("", id.AuthHost, upstream, cert)
	if err != nil {
		return step{}, err
	}
	s.Name, s.Request = authRouteInstance, authRouteInstance
	return s, nil
}

// trustCA gives each node of an app the root of the issuer's private CA: SSL_CERT_FILE
// names a file holding it (the system's roots stay trusted through their directory).
// A node that sets SSL_CERT_FILE itself is left alone.
func trustCA(nodes []step, ca string) error {
	if ca == "" {
		return nil
	}
	for i := range nodes {
		var spec contract.InstanceRequest
		if err := json.Unmarshal(nodes[i].Spec, &spec); err != nil {
			return fmt.Errorf("node %s: %w", nodes[i].Name, err)
		}
		if _, set := spec.Env["SSL_CERT_FILE"]; set {
			continue
		}
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		if spec.Files == nil {
			spec.Files = map[string]contract.InstanceFile{}
		}
		spec.Files[trustFile] = contract.InstanceFile{Content: ca}
		spec.Env["SSL_CERT_FILE"] = "${file:" + trustFile + "}"
		raw, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		nodes[i].Spec = raw
	}
	return nil
}

// signsIn reports whether an app asks for a client of the deployment's provider.
func (ap *appPlan) signsIn() bool {
	return slices.ContainsFunc(ap.Steps, func(s step) bool { return s.Type == contract.OIDC })
}

// oidcRefs are the secrets an oidc step's spec names: the directory's bind password.
func oidcRefs(spec json.RawMessage) []string {
	var req contract.OIDCRequest
	if json.Unmarshal(spec, &req) == nil && req.Directory != nil {
		return []string{req.Directory.BindPassword.Secret}
	}
	return nil
}
