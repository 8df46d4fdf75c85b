package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk/app"
)

// fetcherSince is the first plugin version whose options keep the feed fetcher's settings
// under one object, fetcher; before it they were top-level options. The environment
// variables they set are Miniflux's in both shapes.
const fetcherSince = "2.3.6"

// fetcherConfig is the fetcher object of the options from fetcherSince on.
type fetcherConfig struct {
	// Timeout is HTTP_CLIENT_TIMEOUT, in seconds (httpClientTimeout before 2.3.6).
	Timeout int `json:"timeout"`
	// AllowPrivateNetworks is FETCHER_ALLOW_PRIVATE_NETWORKS (fetcherAllowPrivateNetworks
	// before 2.3.6).
	AllowPrivateNetworks bool `json:"allowPrivateNetworks"`
}

// fetcherMoves are the flat options of the versions before fetcherSince and where they
// went, in the order of the schema.
var fetcherMoves = []struct{ flat, field string }{
	{"httpClientTimeout", "timeout"},
	{"fetcherAllowPrivateNetworks", "allowPrivateNetworks"},
}

// hasFetcher reports whether Miniflux version v (MAJOR.MINOR.PATCH, a leading v and a
// pre-release or build suffix allowed) has the fetcher object, that is is fetcherSince or
// later in semantic version order, as the host compares Since (a pre-release of 2.3.6 is
// below it). A version it cannot read is taken as the newest shape.
func hasFetcher(v string) bool {
	want, _, _ := versionNumbers(fetcherSince)
	got, pre, ok := versionNumbers(v)
	if !ok {
		return true
	}
	for i := range got {
		if got[i] != want[i] {
			return got[i] > want[i]
		}
	}
	return !pre
}

func versionNumbers(v string) (n [3]int, pre bool, ok bool) {
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "+")
	core, _, pre = strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return n, pre, false
	}
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return n, pre, false
		}
		n[i] = x
	}
	return n, pre, true
}

// Renames moves the flat fetch options into fetcher for configurations made before
// fetcherSince; the host applies them only on the way from a version below it.
func (miniflux) Renames(context.Context) ([]app.Rename, error) {
	if !hasFetcher(version) {
		return nil, nil
	}
	out := make([]app.Rename, len(fetcherMoves))
	for i, m := range fetcherMoves {
		out[i] = app.Rename{From: "/" + m.flat, To: "/fetcher/" + m.field, Since: fetcherSince}
	}
	return out, nil
}

// schemaFor is the options' schema of Miniflux version v: schema.json (the flat shape of
// the versions before fetcherSince) or, from fetcherSince on, the same with the fetch
// options moved into the object fetcher, each under its new name.
func schemaFor(v string) ([]byte, error) {
	if !hasFetcher(v) {
		return schemaJSON, nil
	}
	var doc map[string]any
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		return nil, err
	}
	props, _ := doc["properties"].(map[string]any)
	fetcher := map[string]any{}
	for i, m := range fetcherMoves {
		p, ok := props[m.flat].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema.json has no option %s", m.flat)
		}
		delete(props, m.flat)
		p["x-order"] = i + 1
		fetcher[m.field] = p
	}
	props["fetcher"] = map[string]any{
		"title":                "Feed fetcher",
		"description":          "How Miniflux fetches feeds (HTTP_CLIENT_*, FETCHER_*). Before Miniflux plugin 2.3.6 these were the top-level options httpClientTimeout and fetcherAllowPrivateNetworks.",
		"type":                 "object",
		"additionalProperties": false,
		"default":              map[string]any{},
		"x-order":              9,
		"properties":           fetcher,
	}
	return json.Marshal(doc)
}

// fetcherOf is the fetcher settings of a configuration of version v, read from
// the raw options' shape of that version. parse decoded c from raw already.
func (c config) fetcherSettings() fetcherConfig {
	if hasFetcher(version) {
		return c.Fetcher
	}
	return fetcherConfig{Timeout: c.HTTPClientTimeout, AllowPrivateNetworks: c.FetcherAllowPrivateNets}
}

// checkShape refuses options in the other version's shape: the host moves them with the
// renames before it hands them over, so a flat fetch option at fetcherSince or later (or
// fetcher before it) is a configuration the schema of this version did not validate.
func checkShape(raw json.RawMessage) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return err
	}
	if hasFetcher(version) {
		for _, m := range fetcherMoves {
			if _, ok := top[m.flat]; ok {
				return fmt.Errorf("option %s is fetcher.%s since Miniflux plugin %s", m.flat, m.field, fetcherSince)
			}
		}
		return nil
	}
	if _, ok := top["fetcher"]; ok {
		return fmt.Errorf("option fetcher comes with Miniflux plugin %s; this is %s", fetcherSince, version)
	}
	return nil
}
