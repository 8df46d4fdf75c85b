package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// wanted is a checked request: the zone and the records it must hold besides its SOA and
// apex NS records, which the plugin keeps.
type wanted struct {
	zone    string // fully qualified, lower case
	records []contract.DNSRecord
	rrs     []dns.RR
}

// maxRecords bounds a request, so that one update message holds the whole zone.
const maxRecords = 500

var nameRE = regexp.MustCompile(`^(\*|[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$`)

// zoneOf returns the zone of a request, checked, fully qualified.
func zoneOf(spec json.RawMessage) (string, error) {
	var req contract.DNSRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return "", sdk.Invalid("request", "the request is not a dns request: %v", err)
	}
	zone := strings.TrimSuffix(strings.ToLower(req.Zone), ".")
	if !validDomain(zone, 2) || strings.Trim(zone[strings.LastIndex(zone, ".")+1:], "0123456789") == "" {
		return "", sdk.Invalid("request/zone", "not a domain name of at least two labels and 253 characters (acme.example, say)")
	}
	return zone + ".", nil
}

// parseRequest checks a dns request and builds its records, with the default TTL where
// a record gives none.
func parseRequest(spec json.RawMessage, ttl uint32) (wanted, error) {
	if err := contract.ValidateRequest(contract.DNS, spec); err != nil {
		return wanted{}, err
	}
	var req contract.DNSRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return wanted{}, sdk.Invalid("request", "the request is not a dns request: %v", err)
	}
	zone, err := zoneOf(spec)
	if err != nil {
		return wanted{}, err
	}
	if len(req.Records) > maxRecords {
		return wanted{}, sdk.Invalid("request/records", "at most %d records per zone", maxRecords)
	}
	w := wanted{zone: zone}
	types := map[string]map[uint16]bool{} // owner name → types, for the CNAME rule
	for i, r := range req.Records {
		field := fmt.Sprintf("request/records/%d", i)
		name := strings.ToLower(r.Name)
		owner := zone
		if name != "@" {
			if !nameRE.MatchString(name) {
				return wanted{}, sdk.Invalid(field+"/name", `not "@" or a name relative to the zone (feeds, _acme-challenge.feeds, say)`)
			}
			owner = name + "." + zone
			if len(owner) > 254 {
				return wanted{}, sdk.Invalid(field+"/name", "the name in the zone is longer than 253 characters")
			}
		}
		rec := contract.DNSRecord{Name: name, Type: r.Type, Value: r.Value, TTL: r.TTL}
		if rec.TTL == 0 {
			rec.TTL = int(ttl)
		}
		rr, err := newRR(owner, uint32(rec.TTL), r.Type, r.Value)
		if err != nil {
			return wanted{}, sdk.Invalid(field+"/value", "not a %s record's value: %s", r.Type, valueHint[r.Type])
		}
		t := rr.Header().Rrtype
		if owner == zone && (t == dns.TypeCNAME || t == dns.TypeNS) {
			return wanted{}, sdk.Invalid(field+"/type", "the zone's apex cannot have a %s record of its own: the plugin keeps the apex NS records", r.Type)
		}
		if types[owner] == nil {
			types[owner] = map[uint16]bool{}
		}
		types[owner][t] = true
		if types[owner][dns.TypeCNAME] && len(types[owner]) > 1 {
			return wanted{}, sdk.Invalid(field+"/name", "a name with a CNAME record can have no other record (RFC 1034, 3.6.2)")
		}
		for _, other := range w.rrs {
			if dns.IsDuplicate(other, rr) {
				return wanted{}, sdk.Invalid(field, "the same record is asked for twice")
			}
			if oh := other.Header(); oh.Name == owner && oh.Rrtype == t && oh.Ttl != rr.Header().Ttl {
				return wanted{}, sdk.Invalid(field+"/ttl", "records of one name and type have one TTL (RFC 2181, 5.2): give them all the same")
			}
		}
		w.records = append(w.records, rec)
		w.rrs = append(w.rrs, rr)
	}
	return w, nil
}

var valueHint = map[string]string{
	"A":     "an IPv4 address",
	"AAAA":  "an IPv6 address",
	"CNAME": "a domain name",
	"NS":    "a domain name",
	"TXT":   "text of at most 4,000 characters",
	"MX":    "a preference and a host name (10 mail.example.org)",
	"SRV":   "priority, weight, port and target (10 5 5060 sip.example.org)",
	"CAA":   `flags, tag and value (0 issue "letsencrypt.org")`,
}

// newRR builds a record from its value. Names in values are absolute (a trailing dot is
// optional); a TXT value is the text itself, cut into strings of 255 bytes.
func newRR(owner string, ttl uint32, typ, value string) (dns.RR, error) {
	hdr := dns.RR_Header{Name: owner, Class: dns.ClassINET, Ttl: ttl}
	if typ == "TXT" {
		if len(value) > 4000 || strings.ContainsAny(value, "\n\r") {
			return nil, fmt.Errorf("bad TXT")
		}
		hdr.Rrtype = dns.TypeTXT
		var parts []string
		for len(value) > 255 {
			parts = append(parts, value[:255])
			value = value[255:]
		}
		return &dns.TXT{Hdr: hdr, Txt: append(parts, value)}, nil
	}
	if strings.ContainsAny(value, "\n\r;()$") {
		return nil, fmt.Errorf("bad value")
	}
	rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", owner, ttl, typ, value))
	if err != nil || rr == nil || dns.TypeToString[rr.Header().Rrtype] != typ {
		return nil, fmt.Errorf("bad value")
	}
	return rr, nil
}

// rrsetKey names a record set: owner and type.
type rrsetKey struct {
	name  string
	rtype uint16
}

func (k rrsetKey) String() string {
	return strings.TrimSuffix(k.name, ".") + " " + dns.TypeToString[k.rtype]
}

// rrsets groups records by owner and type, with each set's records in a canonical text.
func rrsets(rrs []dns.RR) map[rrsetKey][]string {
	sets := map[rrsetKey][]string{}
	for _, rr := range rrs {
		h := rr.Header()
		k := rrsetKey{strings.ToLower(h.Name), h.Rrtype}
		sets[k] = append(sets[k], canonical(rr))
	}
	for k := range sets {
		sort.Strings(sets[k])
	}
	return sets
}

// canonical is a record's text with a lower-case owner and the TTL kept: a changed TTL
// is a change.
func canonical(rr dns.RR) string {
	rr = dns.Copy(rr)
	rr.Header().Name = strings.ToLower(rr.Header().Name)
	return rr.String()
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
