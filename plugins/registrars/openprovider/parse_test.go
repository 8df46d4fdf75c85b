package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/registrar"
)

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	e, err := parseEnvelope([]byte(`{"code":0,"desc":"","data":{"id":7,"status":"REQ"}}`))
	require.NoError(t, err)
	require.Equal(t, 0, *e.Code)
	_, err = parseEnvelope([]byte(`{"desc":"no code"}`))
	require.Error(t, err, "an answer without a code is not taken as success")
	_, err = parseEnvelope([]byte(`<html>503</html>`))
	require.Error(t, err)

	var o opDomain
	require.NoError(t, json.Unmarshal([]byte(`{"id":"12","domain":{"name":"acme","extension":"co.uk"},"status":"ACT",
		"expiration_date":"2027-12-02 10:00:00","is_locked":true,"name_servers":[{"name":"NS1.Example.net","seq_nr":1}],"dnssec_keys":[{"alg":13,"flags":257,"protocol":3,"pub_key":"AwEAAa"}]}`), &o))
	d := o.toDomain()
	require.Equal(t, registrar.Domain{Name: "acme.co.uk", Status: registrar.StatusActive, Expires: time.Date(2027, 12, 2, 10, 0, 0, 0, time.UTC),
		Locked: true, Nameservers: []string{"ns1.example.net"}, DNSSEC: true}, d)
	require.Equal(t, domainName{Name: "acme", Extension: "co.uk"}, split("acme.co.uk"))
}

func TestCustomerRoundTrip(t *testing.T) {
	t.Parallel()
	c := registrar.Contact{ID: "FH000001-DE", Name: "Grace Brewster Hopper", Email: "grace@example.com", Phone: "+12025550143",
		Street: "Pennsylvania Ave 1600", City: "Washington", PostalCode: "20500", Country: "US"}
	o, err := fromContact(c)
	require.NoError(t, err)
	require.Equal(t, "+1", o.Phone.CountryCode)
	require.Equal(t, "202", o.Phone.AreaCode)
	require.Equal(t, "1600", o.Address.Number)
	o.Handle = c.ID
	require.Equal(t, c, o.toContact())
}

// FuzzParseEnvelope feeds answers to the envelope parser and the decoders of data: none
// may panic, and what is read stays bounded.
func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"code":0,"data":{"results":[{"id":1,"domain":{"name":"a","extension":"test"},"status":"REQ","expiration_date":"2027-01-01 00:00:00"}],"total":1}}`))
	f.Add([]byte(`{"code":196,"desc":"Authentication/Authorization Failed","data":{}}`))
	f.Add([]byte(`{"code":0,"data":{"handle":"FH000001-DE","name":{"first_name":"A","last_name":"B"},"phone":{"country_code":"+49","area_code":"30","subscriber_number":"123456"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := parseEnvelope(body)
		if err != nil {
			return
		}
		var list struct {
			Results []opDomain `json:"results"`
		}
		if json.Unmarshal(e.Data, &list) == nil {
			for _, o := range list.Results {
				d := o.toDomain()
				if len(d.Name) > 253 || len(d.Nameservers) > 13 || len(d.Status) > 64 {
					t.Fatalf("unbounded domain %+v", d)
				}
			}
		}
		var c customer
		if json.Unmarshal(e.Data, &c) == nil {
			ct := c.toContact()
			if len(ct.ID) > 64 || len(ct.Country) > 2 || len(ct.Phone) > 16 {
				t.Fatalf("unbounded contact %+v", ct)
			}
		}
	})
}
