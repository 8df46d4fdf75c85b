package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

// fuzzCatalog is the catalog of the Miniflux and PeerTube plugins' schemas, with
// Miniflux renames of every kind: a move, a move into a new object, one onto a set
// option and one under a value that is not an object.
func fuzzCatalog(f *testing.F) *Catalog {
	f.Helper()
	c := &Catalog{byName: map[string]*App{}, versions: map[string]map[string]*App{}}
	for _, name := range []string{"miniflux", "peertube"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "plugins", "apps", name, "schema.json"))
		if err != nil {
			f.Fatal(err)
		}
		a := &App{Name: name, Version: "1.0.0", Summary: name, Schema: raw}
		c.apps = append(c.apps, a)
		c.byName[name] = a
		c.versions[name] = map[string]*App{a.Version: a}
	}
	c.byName["miniflux"].Renames = []app.Rename{
		{From: "/pollingInterval", To: "/pollingFrequency", Since: "2.3.0"},
		{From: "/sso", To: "/oidc/enable", Since: "2.3.0"},
		{From: "/adminName", To: "/adminUsername", Since: "2.3.0"},
		{From: "/limits", To: "/logLevel/max", Since: "2.3.0"},
	}
	if err := c.compose(); err != nil {
		f.Fatal(err)
	}
	return c
}

// scalars counts the strings, numbers, booleans and nulls of a JSON document.
func scalars(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 0
		for _, e := range v {
			n += scalars(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += scalars(e)
		}
		return n
	}
	return 1
}

// strs collects the keys and the string values of a JSON document.
func strs(v any, keys, values map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			keys[k] = true
			strs(e, keys, values)
		}
	case []any:
		for _, e := range v {
			strs(e, keys, values)
		}
	case string:
		values[v] = true
	}
}

// FuzzApplyRenamesValidate runs a submitted configuration through what a submit does
// (the renames of the app versions, then the schema) with the catalog's renames and one
// more of the fuzzer's. Renames move values and lose none; the error of Validate names
// the wrong value's place and never shows a value.
func FuzzApplyRenamesValidate(f *testing.F) {
	c := fuzzCatalog(f)
	f.Add(`{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{
		"pollingInterval":15,"sso":true,"adminName":"old","adminUsername":"new","logLevel":"info","limits":3}}}}`, "/batch", "/batchSize")
	f.Add(`{"domain":"example.org","apps":{"miniflux":{"enable":true,"options":{"adminUsername":"not a valid name!","pollingFrequency":3}}}}`, "", "")
	f.Add(`{"domain":"EXAMPLE.ORG-secret-value","apps":{}}`, "", "")
	f.Add(`{"domain":"x.org","apps":{"miniflux":{"enable":"secret-value-1"}}}`, "", "")
	f.Add(`{"domain":"x.org","apps":{"peertube":{"enable":true,"options":{"instance_name":12,"signup":"secret-value-2"}}}}`, "", "")
	f.Add(`{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{"oidc":{"enable":"yes-really"}}}}}`, "/oidc", "/oidc/old")
	f.Add(`{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{"a":{"b":1}}}}}`, "/a", "/a/b/c")
	f.Add(`{"domain":"x.org","apps":{"miniflux":{"options":{"a~1b":1,"m~0n":2}}}}`, "/a~1b", "/m~0n/x")
	f.Add(`{"domain":"x.org","extra":"secret-value-3"}`, "", "")
	f.Add(`[1,2]`, "/0", "/1")
	f.Add(`{"domain": 1e400}`, "", "")
	f.Fuzz(func(t *testing.T, config, from, to string) {
		a := *c.byName["miniflux"]
		a.Renames = append(append([]app.Rename{}, a.Renames...), app.Rename{From: from, To: to, Since: "2.4.0"})
		renamer := &Catalog{byName: map[string]*App{"miniflux": &a, "peertube": c.byName["peertube"]}}

		var in any
		inErr := json.Unmarshal([]byte(config), &in)
		out, unmigrated, err := renamer.ApplyRenames(json.RawMessage(config), nil)
		if err != nil {
			if _, isObject := in.(map[string]any); inErr == nil && isObject {
				t.Fatalf("ApplyRenames refused a JSON object: %v", err)
			}
			if len(config) >= 8 && strings.Contains(err.Error(), config) {
				t.Fatalf("the error of ApplyRenames shows the configuration: %v", err)
			}
			return
		}
		var moved any
		if err := json.Unmarshal(out, &moved); err != nil {
			t.Fatalf("ApplyRenames returned invalid JSON %q: %v", out, err)
		}
		if got, want := scalars(moved), scalars(in); got != want {
			t.Fatalf("ApplyRenames with %q to %q turned %d values into %d (%d unmigrated):\n in: %s\nout: %s",
				from, to, want, got, len(unmigrated), config, out)
		}

		err = c.Validate(out)
		if err == nil {
			return
		}
		var se *sdk.Error
		if !errors.As(err, &se) || se.Code != sdk.CodeInvalid {
			t.Fatalf("Validate returned %T %v, want an invalid_request *sdk.Error", err, err)
		}
		keys, values := map[string]bool{}, map[string]bool{}
		strs(moved, keys, values)
		for v := range values {
			if len(v) < 6 || !strings.Contains(se.Message, v) || strings.Contains(string(c.Schema()), v) {
				continue
			}
			isKey := false
			for k := range keys {
				isKey = isKey || strings.Contains(k, v)
			}
			if !isKey {
				t.Fatalf("the error of Validate shows the value %q: %v", v, err)
			}
		}
	})
}
