package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/plugins/registrars/internal/wirevalue"
)

func TestParseResponse(t *testing.T) {
	t.Parallel()
	r, err := parseResponse([]byte(`{"code":1001,"msg":"Command completed successfully; action pending","resData":{"roId":7}}`))
	require.NoError(t, err)
	require.Equal(t, codePending, r.Code)
	_, err = parseResponse([]byte(`<html>502</html>`))
	require.Error(t, err)
	_, err = parseResponse([]byte(`{"msg":"no code"}`))
	require.Error(t, err)

	var i domainInfo
	require.NoError(t, json.Unmarshal([]byte(`{"domain":"acme.test","exDate":"2027-12-02 10:00:00","transferLock":"1","status":"OK","ns":["ns1.example.net"]}`), &i))
	d := i.toDomain()
	require.True(t, d.Locked)
	require.Equal(t, time.Date(2027, 12, 2, 10, 0, 0, 0, time.UTC), d.Expires)
	require.Equal(t, "active", d.Status)

	var p struct {
		Price wirevalue.Price `json:"price"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"price":12.5}`), &p))
	require.Equal(t, wirevalue.Price(12_500_000), p.Price)
	require.Error(t, json.Unmarshal([]byte(`{"price":-1}`), &p))
}

// FuzzParseResponse feeds DomRobot answers to the parser and the decoders of resData:
// none may panic, and a domain read from them stays bounded.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"code":1000,"msg":"ok","resData":{"domain":"acme.test","exDate":"2027-12-02T10:00:00Z","transferLock":1,"ns":["a.example"],"status":"OK"}}`))
	f.Add([]byte(`{"code":1000,"resData":{"domain":[{"domain":"acme.test","avail":"1","price":"9.99"}]}}`))
	f.Add([]byte(`{"code":2303,"msg":"Object does not exist","reasonCode":"X"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseResponse(body)
		if err != nil {
			return
		}
		var i domainInfo
		if json.Unmarshal(r.ResData, &i) == nil {
			d := i.toDomain()
			if len(d.Name) > 253 || len(d.Nameservers) > 13 || len(d.Status) > 64 {
				t.Fatalf("unbounded domain %+v", d)
			}
		}
		var c struct {
			Domain []struct {
				Avail wirevalue.Number `json:"avail"`
				Price wirevalue.Price  `json:"price"`
			} `json:"domain"`
		}
		if json.Unmarshal(r.ResData, &c) == nil {
			for _, e := range c.Domain {
				if e.Price < 0 {
					t.Fatalf("negative price from %q", body)
				}
			}
		}
	})
}
