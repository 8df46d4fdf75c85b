package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestParseImage(t *testing.T) {
	for _, c := range []struct {
		image          string
		server, alias  string
		protocol       string
		system, failed bool
	}{
		{image: "ghcr.io/mastodon/mastodon:v4.3.2", server: "https://ghcr.io", alias: "mastodon/mastodon:v4.3.2", protocol: "oci"},
		{image: "docker.io/chocobozzz/peertube:v7.0.1-bookworm", server: "https://docker.io", alias: "chocobozzz/peertube:v7.0.1-bookworm", protocol: "oci"},
		{image: "nginx:1", server: "https://docker.io", alias: "library/nginx:1", protocol: "oci"},
		{image: "localhost:5000/app", server: "https://localhost:5000", alias: "app", protocol: "oci"},
		{image: "registry.example.net/a/b@sha256:" + strings.Repeat("ab", 32), server: "https://registry.example.net", alias: "a/b@sha256:" + strings.Repeat("ab", 32), protocol: "oci"},
		{image: "images:debian/12", server: "https://images.example.org", alias: "debian/12", protocol: "simplestreams", system: true},
		{image: "Nginx:1", failed: true},
		{image: "images:Debian 12", failed: true},
		{image: "a//b", failed: true},
		{image: "ghcr.io/x/y:tag with space", failed: true},
	} {
		src, system, err := parseImage(c.image, "https://images.example.org")
		if c.failed {
			require.Error(t, err, c.image)
			require.Equal(t, "request/artifact/image", sdk.FieldOf(err))
			require.NotContains(t, err.Error(), c.image, "the error echoes the input")
			continue
		}
		require.NoError(t, err, c.image)
		require.Equal(t, imageSource{Type: "image", Mode: "pull", Server: c.server, Protocol: c.protocol, Alias: c.alias}, src, c.image)
		require.Equal(t, c.system, system)
	}
}

var incusInstanceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,61}[a-z0-9]$`)

func TestInstanceNames(t *testing.T) {
	long := strings.Repeat("abcdefghi-", 6) + "abc"
	for _, n := range [][2]string{{"a-b", "c"}, {"a", "b-c"}, {long, long}, {"t", "web"}} {
		name := instanceName(n[0], n[1])
		require.Regexp(t, incusInstanceName, name)
		require.LessOrEqual(t, len(name), 58)
	}
	require.NotEqual(t, instanceName("a-b", "c"), instanceName("a", "b-c"))
}

func TestRunScriptQuotes(t *testing.T) {
	s := runScript([]string{"/bin/sh", "-c", "echo 'hi' $HOME"}, map[string]string{"B": "it's", "A": "1"}, "/srv/fedhost", true)
	require.Equal(t, "#!/bin/sh\nexport A='1'\nexport B='it'\\''s'\ncd '/srv/fedhost' || exit 1\nexec '/bin/sh' '-c' 'echo '\\''hi'\\'' $HOME'\n", s)
	require.Equal(t, "#!/bin/sh\nexec 'x'\n", runScript([]string{"x"}, map[string]string{"A": "1"}, "/srv/fedhost", false))
}

func TestSpecChecks(t *testing.T) {
	cfg := settings{NodeDir: "/srv/fedhost", ListenHost: "127.0.0.1", SystemImageServer: "https://images.example.org"}
	for _, c := range []struct {
		field string
		edit  func(*contract.InstanceRequest)
	}{
		{"request/artifact/binary", func(s *contract.InstanceRequest) { s.Artifact = contract.Artifact{Binary: "x"} }},
		{"request/volumes/0/path", func(s *contract.InstanceRequest) { s.Volumes = []contract.Volume{{Name: "d", Path: "/srv/../etc"}} }},
		{"request/env/X", func(s *contract.InstanceRequest) { s.Env = map[string]string{"X": "${secret:a}"} }},
		{"request/args/0", func(s *contract.InstanceRequest) { s.Args = []string{"${port:nope}"} }},
		{"request/health/port", func(s *contract.InstanceRequest) { s.Health = &contract.Health{Port: "other"} }},
		{"request/ports/1/name", func(s *contract.InstanceRequest) { s.Ports = []contract.Port{{Name: "a"}, {Name: "a"}} }},
		{"request/files", func(s *contract.InstanceRequest) { s.Files = map[string]contract.InstanceFile{".fedhost": {}} }},
		{"request/artifact/image", func(s *contract.InstanceRequest) { s.Artifact.Image = "UPPER" }},
		{"request/args", func(s *contract.InstanceRequest) { s.Artifact.Image = "images:debian/12"; s.Args = nil }},
	} {
		spec := contract.InstanceRequest{Artifact: contract.Artifact{Image: "nginx:1"}, Args: []string{"nginx"}}
		c.edit(&spec)
		_, _, err := checkSpec(spec, cfg)
		require.Error(t, err, c.field)
		require.Equal(t, c.field, sdk.FieldOf(err), err.Error())
	}
}

func TestSettingsErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("secret-looking text"), 0o600))
	for field, s := range map[string]map[string]any{
		"settings/url":              {"url": "http://incus.example.net:8443"},
		"settings/client_cert_file": {"url": "https://incus.example.net:8443", "client_cert_file": notPEM, "client_key_file": notPEM},
	} {
		raw, _ := json.Marshal(s)
		_, _, err := parseSettings(raw)
		require.Equal(t, field, sdk.FieldOf(err), err)
		require.NotContains(t, err.Error(), "secret-looking")
	}
	_, err := readPEMCert(missing)
	require.ErrorContains(t, err, "cannot be read")
	_, err = readPEMCert(notPEM)
	require.ErrorContains(t, err, "no PEM certificate")
}

func TestParseResponse(t *testing.T) {
	r, err := parseResponse(200, []byte(`{"type":"sync","status":"Success","status_code":200,"metadata":{"a":1}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(r.Metadata))
	r, err = parseResponse(202, []byte(`{"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/5e8f-11aa","metadata":{}}`))
	require.NoError(t, err)
	require.Equal(t, "5e8f-11aa", r.Operation)
	_, err = parseResponse(404, []byte(`{"type":"error","error":"Instance not found","error_code":404}`))
	require.True(t, isNotFound(err))
	require.EqualError(t, err, "Instance not found (404)")
	_, err = parseResponse(409, []byte(`{"type":"error","error":"Volume by that name already exists","error_code":409}`))
	require.True(t, isConflict(err))
	_, err = parseResponse(202, []byte(`{"type":"async","operation":"/1.0/operations/../../instances"}`))
	require.Error(t, err)
	_, err = parseResponse(502, []byte(`<html>bad gateway</html>`))
	var api *apiError
	require.True(t, errors.As(err, &api))
	require.Equal(t, 502, api.Code)
	_, err = parseResponse(200, []byte(`{"type":"mystery"}`))
	require.ErrorContains(t, err, "none of sync, async, error")
}

func FuzzParseResponse(f *testing.F) {
	f.Add(200, []byte(`{"type":"sync","status":"Success","status_code":200,"metadata":{}}`))
	f.Add(202, []byte(`{"type":"async","operation":"/1.0/operations/1-2","metadata":{"id":"1-2","status_code":103}}`))
	f.Add(404, []byte(`{"type":"error","error":"Instance not found","error_code":404}`))
	f.Add(500, []byte(`not json`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r, err := parseResponse(status, body)
		if err != nil {
			var api *apiError
			if errors.As(err, &api) && len(api.Message) > maxMessage+len("…") {
				t.Fatalf("a server message of %d bytes was kept", len(api.Message))
			}
			return
		}
		switch r.Type {
		case "sync":
			if status >= 400 {
				t.Fatalf("a sync answer with HTTP %d was taken", status)
			}
		case "async":
			if !operationID.MatchString(r.Operation) {
				t.Fatalf("operation id %q was taken", r.Operation)
			}
		default:
			t.Fatalf("envelope type %q was taken", r.Type)
		}
	})
}

func FuzzParseImage(f *testing.F) {
	for _, s := range []string{"ghcr.io/mastodon/mastodon:v4.3.2", "nginx:1", "localhost:5000/app", "images:debian/12", "a//b", "Nginx", "images:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		src, system, err := parseImage(image, "https://images.example.org")
		if err != nil {
			if sdk.FieldOf(err) != "request/artifact/image" {
				t.Fatalf("error at %q", sdk.FieldOf(err))
			}
			return
		}
		if !strings.HasPrefix(src.Server, "https://") || src.Alias == "" || strings.ContainsAny(src.Alias+src.Server, " \t\n?#") {
			t.Fatalf("%q became %+v", image, src)
		}
		if system != (src.Protocol == "simplestreams") {
			t.Fatalf("%q: system %v with protocol %s", image, system, src.Protocol)
		}
	})
}
