package main

import (
	"context"
	"strings"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
	"github.com/fedhost/fedhost/plugins/registrars/internal/wirevalue"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// signed reads with dnssec.info which of names have DNSSEC keys at the registry; a
// driver whose account may not use dnssec.* (unsupported) reads none as signed.
func (d *driver) signed(ctx context.Context, rpc *domrobot, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	var res struct {
		Data []struct {
			Domain   string           `json:"domain"`
			KeyCount wirevalue.Number `json:"keyCount"`
		} `json:"data"`
	}
	_, err := rpc.call(ctx, "dnssec.info", map[string]any{"domains": names}, &res, "domain")
	if sdk.CodeOf(err) == sdk.CodeUnsupported {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range res.Data {
		if e.KeyCount > 0 {
			out[strings.ToLower(e.Domain)] = true
		}
	}
	return out, nil
}

// withDNSSEC sets the DNSSEC flag of domains from dnssec.info.
func (d *driver) withDNSSEC(ctx context.Context, rpc *domrobot, domains []registrar.Domain) error {
	names := make([]string, len(domains))
	for i, dom := range domains {
		names[i] = dom.Name
	}
	s, err := d.signed(ctx, rpc, names)
	if err != nil {
		return err
	}
	for i := range domains {
		domains[i].DNSSEC = s[domains[i].Name]
	}
	return nil
}

// RemoveDNSSEC calls dnssec.deleteall, which removes every DNSKEY and DS record of the
// domain, as a move to other nameservers needs.
func (d *driver) RemoveDNSSEC(ctx context.Context, domain string) (registrar.Domain, error) {
	name, err := reqcheck.Domain("domain", domain)
	if err != nil {
		return registrar.Domain{}, err
	}
	rpc, _, err := d.client()
	if err != nil {
		return registrar.Domain{}, err
	}
	if _, err := rpc.call(ctx, "dnssec.deleteall", map[string]any{"domainName": name}, nil, "domain"); err != nil {
		return registrar.Domain{}, err
	}
	return d.Domain(ctx, name)
}

var _ registrar.DNSSECRemover = (*driver)(nil)
