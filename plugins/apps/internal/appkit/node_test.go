package appkit

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedhost/fedhost/sdk/contract"
)

// The start script, run by a real shell the way the host would after writing the files,
// puts each secret into its variable and runs the command with it.
func TestStartScriptExportsSecrets(t *testing.T) {
	t.Parallel()
	n := NewNode("web", "example/image:1")
	n.SecretEnv("DB_PASS", "ref-db").
		SecretEnvPrefixed("APP_KEY", "base64:", "ref-key").
		Env("PLAIN", "x").
		Shell(`export DERIVED="$DB_PASS-derived"`).
		Command("sh", "-c", `printf '%s|%s|%s' "$DB_PASS" "$APP_KEY" "$DERIVED"`)
	node, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw := node.Spec
	if err := contract.ValidateRequest(contract.Instance, raw); err != nil {
		t.Fatalf("node spec: %v", err)
	}
	var spec contract.InstanceRequest
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	// Play the host: reveal each ${secret:REF} into its file, point ${file:NAME} at it.
	dir := t.TempDir()
	values := map[string]string{"ref-db": "p@ss w\"ord'$x", "ref-key": "c2VjcmV0"}
	env := os.Environ()
	for name, f := range spec.Files {
		content := f.Content
		for ref, v := range values {
			content = strings.ReplaceAll(content, "${secret:"+ref+"}", v)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range spec.Env {
		if strings.HasPrefix(v, "${file:") {
			v = filepath.Join(dir, strings.TrimSuffix(strings.TrimPrefix(v, "${file:"), "}"))
		}
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("start script: %v\n%s", err, out)
	}
	want := values["ref-db"] + "|base64:" + values["ref-key"] + "|" + values["ref-db"] + "-derived"
	if string(out) != want {
		t.Errorf("the command saw %q, want %q", out, want)
	}
	if strings.Contains(string(raw), values["ref-db"]) {
		t.Errorf("the node spec holds a secret value")
	}
}

func TestDecodeFillsDefaultsAndNamesWrongOption(t *testing.T) {
	t.Parallel()
	o := MustOptions([]byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "size": {"type": "integer", "minimum": 1, "default": 5},
    "name": {"type": "string", "default": "x"}
  },
  "additionalProperties": false
}`))
	var c struct {
		Size int    `json:"size"`
		Name string `json:"name"`
	}
	err := o.Decode(json.RawMessage(`{"name": "y"}`), &c)
	if err != nil || c.Size != 5 || c.Name != "y" {
		t.Fatalf("decode: %+v %v", c, err)
	}
	err = o.Decode(json.RawMessage(`{"size": 0}`), &c)
	if err == nil || !strings.Contains(err.Error(), "/size") {
		t.Errorf("a size below the minimum: got %v, want an error at /size", err)
	}
	if err := CheckDomain("Not A Host"); err == nil || !strings.Contains(err.Error(), "domain") {
		t.Errorf("a domain that is no host name: got %v, want an error naming the domain", err)
	}
}
