package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/fedhost/fedhost/sdk"
)

// signer signs messages with one zone's TSIG key.
type signer struct {
	key zoneKey
}

func (s signer) client(network string) *dns.Client {
	return &dns.Client{Net: network, Timeout: 5 * time.Second, TsigSecret: map[string]string{s.key.name: s.key.secret}}
}

func (s signer) sign(m *dns.Msg) { m.SetTsig(s.key.name, dns.HmacSHA256, 300, time.Now().Unix()) }

// served returns the records of the zone on server by a transfer signed with the zone's
// key, without the SOA and apex NS records the plugin keeps.
func (s signer) served(ctx context.Context, server, zone string) ([]dns.RR, error) {
	m := new(dns.Msg)
	m.SetAxfr(zone)
	s.sign(m)
	tr := &dns.Transfer{TsigSecret: map[string]string{s.key.name: s.key.secret}, DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < tr.ReadTimeout {
			tr.ReadTimeout = left
		}
	}
	envs, err := tr.In(m, server)
	if err != nil {
		return nil, sdk.Unavailable("transfer of zone %s from %s: %v", strings.TrimSuffix(zone, "."), server, err)
	}
	var out []dns.RR
	for e := range envs {
		if e.Error != nil {
			return nil, sdk.Unavailable("transfer of zone %s from %s: %v", strings.TrimSuffix(zone, "."), server, e.Error)
		}
		for _, rr := range e.RR {
			h := rr.Header()
			if h.Rrtype == dns.TypeSOA || (h.Rrtype == dns.TypeNS && strings.EqualFold(h.Name, zone)) {
				continue
			}
			out = append(out, rr)
		}
	}
	return out, nil
}

// update sends one dynamic update to server and fails unless it succeeds.
func (s signer) update(ctx context.Context, server string, m *dns.Msg) error {
	s.sign(m)
	r, _, err := s.client("tcp").ExchangeContext(ctx, m, server)
	if err != nil {
		return sdk.Unavailable("dynamic update of zone %s on %s: %v", strings.TrimSuffix(m.Question[0].Name, "."), server, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return &updateRefused{zone: m.Question[0].Name, server: server, rcode: r.Rcode}
	}
	return nil
}

// updateRefused is a server's answer other than NOERROR to an update.
type updateRefused struct {
	zone, server string
	rcode        int
}

func (e *updateRefused) Error() string {
	return fmt.Sprintf("%s answered %s to the dynamic update of zone %s", e.server, dns.RcodeToString[e.rcode], strings.TrimSuffix(e.zone, "."))
}

// converge changes the zone on the primary so that it holds exactly want besides its SOA
// and apex NS records, in one update, and says which record sets it changed.
func (s signer) converge(ctx context.Context, primary, zone string, want []dns.RR) ([]rrsetKey, error) {
	have, err := s.served(ctx, primary, zone)
	if err != nil {
		return nil, err
	}
	haveSets, wantSets := rrsets(have), rrsets(want)
	var changed []rrsetKey
	for k, h := range haveSets {
		if !sameSet(h, wantSets[k]) {
			changed = append(changed, k)
		}
	}
	for k := range wantSets {
		if _, ok := haveSets[k]; !ok {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	m := new(dns.Msg)
	m.SetUpdate(zone)
	for _, k := range changed {
		m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: k.name, Rrtype: k.rtype, Class: dns.ClassINET}}})
		var add []dns.RR
		for _, rr := range want {
			if h := rr.Header(); strings.EqualFold(h.Name, k.name) && h.Rrtype == k.rtype {
				add = append(add, rr)
			}
		}
		if len(add) > 0 {
			m.Insert(add)
		}
	}
	if err := s.update(ctx, primary, m); err != nil {
		var refused *updateRefused
		if errors.As(err, &refused) {
			return nil, sdk.Unavailable("%v: check the zone's update-policy on the primary; named also refuses records that fail its checks (an MX or SRV whose target in the zone has no address), its log names the record", err)
		}
		return nil, err
	}
	return changed, nil
}

// waitServed waits until every server answers each record set of sets (want's records,
// or none for a set that is gone) and fails naming the record set and the server that
// does not.
func waitServed(ctx context.Context, servers []string, wait time.Duration, want []dns.RR, sets []rrsetKey) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	wantSets := rrsets(want)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	for _, server := range servers {
		for _, k := range sets {
			var last string
			for {
				got, err := query(ctx, c, server, k)
				if err == nil && sameSet(got, wantSets[k]) {
					break
				}
				if err != nil {
					last = err.Error()
				} else {
					last = fmt.Sprintf("it answers %d records, want %d", len(got), len(wantSets[k]))
				}
				select {
				case <-ctx.Done():
					return sdk.Unavailable("%s does not answer %s as published after %s (%s): check that it is authoritative for the zone and gets its changes from the primary", server, k, wait, last)
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// query asks server alone, without recursion, for one record set, and returns its
// records in canonical text; an authoritative "no such name" or "no data" is no records.
func query(ctx context.Context, c *dns.Client, server string, k rrsetKey) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(k.name, k.rtype)
	m.RecursionDesired = false
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		tcp := *c
		tcp.Net = "tcp"
		r, _, err = tcp.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("no answer")
		}
		return nil, err
	}
	if !r.Authoritative {
		return nil, fmt.Errorf("its answer is not authoritative (%s)", dns.RcodeToString[r.Rcode])
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("it answers %s", dns.RcodeToString[r.Rcode])
	}
	var rrs []dns.RR
	for _, rr := range r.Answer {
		if h := rr.Header(); strings.EqualFold(h.Name, k.name) && h.Rrtype == k.rtype {
			rrs = append(rrs, rr)
		}
	}
	return rrsets(rrs)[k], nil
}

// zoneServed reports whether server answers authoritatively for zone's SOA.
func zoneServed(ctx context.Context, server, zone string) (bool, error) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(zone, dns.TypeSOA)
	m.RecursionDesired = false
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return false, err
	}
	return r.Authoritative && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0, nil
}

// waitZone waits until every server serves zone (or, with gone, none does).
func waitZone(ctx context.Context, servers []string, wait time.Duration, zone string, gone bool) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for _, server := range servers {
		for {
			ok, err := zoneServed(ctx, server, zone)
			if err == nil && ok != gone {
				break
			}
			select {
			case <-ctx.Done():
				what := "serve"
				if gone {
					what = "stop serving"
				}
				return sdk.Unavailable("%s did not %s zone %s within %s: check that it gets its zones from the primary", server, what, strings.TrimSuffix(zone, "."), wait)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}
