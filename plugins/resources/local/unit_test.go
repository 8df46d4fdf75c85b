package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestCheckSpecRefuses(t *testing.T) {
	t.Parallel()
	cfg := settings{ArtifactsDir: artifactsDir}
	for _, tc := range []struct {
		name  string
		edit  func(*contract.InstanceRequest)
		field string
	}{
		{"valid", nil, ""},
		{"image", func(s *contract.InstanceRequest) { s.Artifact = contract.Artifact{Image: "busybox"} }, "request/artifact/image"},
		{"missing binary", func(s *contract.InstanceRequest) { s.Artifact.Binary = "nope" }, "request/artifact/binary"},
		{"escaping binary", func(s *contract.InstanceRequest) { s.Artifact.Binary = "../bin/fedhost-resource-local" }, "request/artifact/binary"},
		{"absolute volume", func(s *contract.InstanceRequest) { s.Volumes[0].Path = "/var/lib/x" }, "request/volumes/0/path"},
		{"escaping volume", func(s *contract.InstanceRequest) { s.Volumes[0].Path = "data/../../x" }, "request/volumes/0/path"},
		{"volume on logs", func(s *contract.InstanceRequest) { s.Volumes[0].Path = "logs/x" }, "request/volumes/0/path"},
		{"volume on a file", func(s *contract.InstanceRequest) { s.Volumes[0].Path = "token" }, "request/volumes/0/path"},
		{"overlapping volumes", func(s *contract.InstanceRequest) {
			s.Volumes = append(s.Volumes, contract.Volume{Name: "inner", Path: "data/inner"})
		}, "request/volumes/1/path"},
		{"reserved file", func(s *contract.InstanceRequest) { s.Files[stateFile] = contract.InstanceFile{} }, "request/files/" + stateFile},
		{"unknown port", func(s *contract.InstanceRequest) { s.Env["X"] = "${port:admin}" }, "request/env/X"},
		{"unknown file", func(s *contract.InstanceRequest) { s.Args = []string{"--config=${file:conf}"} }, "request/args/0"},
		{"secret in env", func(s *contract.InstanceRequest) { s.Env["PW"] = "${secret:token}" }, "request/env/PW"},
		{"health on no port", func(s *contract.InstanceRequest) { s.Health.Port = "admin" }, "request/health/port"},
		{"port twice", func(s *contract.InstanceRequest) { s.Ports = append(s.Ports, s.Ports[0]) }, "request/ports/1/name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec, err := parseSpec(nodeSpec(tc.edit))
			require.NoError(t, err)
			_, _, err = checkSpec(cfg, spec)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), "%v", err)
			require.Equal(t, tc.field, sdk.FieldOf(err))
		})
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	files := map[string]contract.InstanceFile{"conf": {}}
	ports := map[string]int{"http": 20001}
	for in, want := range map[string]string{
		"${host}:${port:http}":    "127.0.0.1:20001",
		"--config=${file:conf}":   "--config=/w/conf",
		"${url:http}callback":     "http://127.0.0.1:20001/callback",
		"plain ${HOME} and $PATH": "plain ${HOME} and $PATH",
		"":                        "",
	} {
		got, err := expand(in, "f", "/w", files, ports)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

func TestResolveFilesAndScrub(t *testing.T) {
	t.Parallel()
	spec := contract.InstanceRequest{Files: map[string]contract.InstanceFile{"env": {Content: "A=${secret:a}\nB=${secret:b}\n"}}}
	secrets := map[string][]byte{"a": []byte("alpha-value"), "b": []byte("beta-value")}
	files, err := resolveFiles(spec, secrets)
	require.NoError(t, err)
	require.Equal(t, "A=alpha-value\nB=beta-value\n", string(files["env"]))
	require.Equal(t, "A=[secret a]\nB=[secret b]\n", scrub(string(files["env"]), secrets))

	_, err = resolveFiles(spec, map[string][]byte{"a": []byte("alpha-value")})
	require.Equal(t, "request/files/env", sdk.FieldOf(err))
	require.NotContains(t, err.Error(), "alpha-value")
}

func TestParseSettings(t *testing.T) {
	t.Parallel()
	s, err := parseSettings([]byte(`{"artifacts_dir": "/opt/a"}`))
	require.NoError(t, err)
	require.Equal(t, settings{ArtifactsDir: "/opt/a", PortLow: 20000, PortHigh: 29999, LogMaxBytes: 10 << 20, LogKeep: 3}, s)
	for _, r := range []string{"1-2", "30000-20000", "20000", "a-b", "2000-70000"} {
		_, err := parseSettings([]byte(`{"artifacts_dir": "/opt/a", "port_range": "` + r + `"}`))
		require.Equal(t, "settings/port_range", sdk.FieldOf(err), r)
	}
}

func TestRotateIfLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stdout.log")
	for i, content := range []string{"first-", "second", "third-", "fourth"} {
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		rotated, err := rotateIfLarge(path, 6, 2)
		require.NoError(t, err)
		require.True(t, rotated, i)
	}
	rotated, err := rotateIfLarge(path, 6, 2)
	require.NoError(t, err)
	require.False(t, rotated, "an empty log was rotated")
	for name, want := range map[string]string{"stdout.log": "", "stdout.log.1": "fourth", "stdout.log.2": "third-"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), name))
		require.NoError(t, err)
		require.Equal(t, want, string(b), name)
	}
	_, err = os.Stat(path + ".3")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestRemoveExcept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"logs/stdout.log", "token", "var/db/x", "var/cache/y", "media/z"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), nil, 0o600))
	}
	require.NoError(t, removeExcept(dir, []string{"var/db", "media"}))
	var left []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, rel)
		}
		return err
	}))
	require.ElementsMatch(t, []string{"var/db/x", "media/z"}, left)
}
