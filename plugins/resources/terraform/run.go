package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/fedhost/fedhost/sdk"
)

const (
	// backendFile is the file the provider adds to its copy of the module: the state is
	// the host's, so a module declares no backend of its own.
	backendFile = "zz_fedhost_backend.tf"
	varFileName = "fedhost.tfvars.json"
	planName    = "fedhost.tfplan"
	cliConfig   = "fedhost.tfrc"
	// A module is a directory of configuration, not of data: what is copied is bounded.
	maxModuleBytes = 64 << 20
	maxModuleFiles = 10000
	// maxOutput bounds one output kept in the result (or a secret).
	maxOutput = 64 << 10
	// maxMessage bounds what of Terraform's error a person is shown.
	maxMessage = 4000
)

// run is one provision or deprovision of a workspace: a copy of the module in a
// directory of its own (mode 0700, removed after), with the variables in a 0600 file.
type run struct {
	cfg                    *config
	mod                    module
	typ, tenant, instance  string
	dir                    string
	tf                     *tfexec.Terraform
	backend                backend
	vars                   map[string]any
	hide                   []string // values no message may hold
	declaresRetain         bool
	workspace, moduleField string
}

// start copies the module, writes the backend and CLI configuration, clears a stale
// lock and runs terraform init.
func (p *provider) start(ctx context.Context, cfg *config, m module, typ, tenant, instance string, spec json.RawMessage, secrets map[string][]byte) (*run, error) {
	base := sdk.DataDir()
	if base == "" {
		base = os.TempDir()
	}
	root := filepath.Join(base, "runs")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("making the directory of terraform runs: %w", err)
	}
	dir, err := os.MkdirTemp(root, tenant+"-"+instance+"-")
	if err != nil {
		return nil, fmt.Errorf("making the directory of a terraform run: %w", err)
	}
	r := &run{cfg: cfg, mod: m, typ: typ, tenant: tenant, instance: instance, dir: dir,
		backend: cfg.backendFor(tenant, instance), workspace: tenant + "/" + instance, moduleField: "settings/modules/" + typ}
	ok := false
	defer func() {
		if !ok {
			r.close()
		}
	}()
	if err := copyModule(m.Dir, dir); err != nil {
		return nil, sdk.Invalid(r.moduleField, "copying the module %s: %v", m.Dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, backendFile), []byte("terraform {\n  backend \"http\" {}\n}\n"), 0o600); err != nil {
		return nil, err
	}
	// Providers come from the mirror only: no registry is asked.
	tfrc := fmt.Sprintf("disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", cfg.providerMirror)
	if err := os.WriteFile(filepath.Join(dir, cliConfig), []byte(tfrc), 0o600); err != nil {
		return nil, err
	}
	r.declaresRetain = declaresVariable(dir, "retain")
	if r.vars, err = r.variables(spec, secrets); err != nil {
		return nil, err
	}

	tf, err := tfexec.NewTerraform(dir, cfg.terraform)
	if err != nil {
		return nil, sdk.Invalid("settings/terraform", "cannot run terraform: %v", err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "TF_") && k != "CHECKPOINT_DISABLE" {
			env[k] = v
		}
	}
	for k, v := range map[string]string{
		"TF_HTTP_ADDRESS": r.backend.url, "TF_HTTP_LOCK_ADDRESS": r.backend.url, "TF_HTTP_UNLOCK_ADDRESS": r.backend.url,
		"TF_HTTP_USERNAME": r.backend.user, "TF_HTTP_PASSWORD": r.backend.password, "TF_HTTP_RETRY_MAX": "2",
		"TF_CLI_CONFIG_FILE": filepath.Join(dir, cliConfig), "CHECKPOINT_DISABLE": "1",
	} {
		env[k] = v
	}
	if err := tf.SetEnv(env); err != nil {
		return nil, err
	}
	r.tf = tf
	r.hide = append(r.hide, r.backend.password, cfg.stateKey)

	if err := r.backend.clearStaleLock(ctx, cfg.staleLockAfter, p.now(), r.workspace); err != nil {
		return nil, err
	}
	if err := tf.Init(ctx, tfexec.Upgrade(false)); err != nil {
		return nil, r.failed("init", err)
	}
	if !r.secretsGiven() {
		if err := r.keepSecretsOfState(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	return r, nil
}

// variables are the module's: tenant, instance, the request (whole as JSON in request,
// and each field by its name), the secrets kept from before (sensitive, a map),
// new_secret (32 random bytes, hex, for a module to generate a password), retain, and the
// hosting provider's own.
func (r *run) variables(spec json.RawMessage, secrets map[string][]byte) (map[string]any, error) {
	vars := map[string]any{}
	for name, v := range r.mod.Variables {
		vars[name] = v
		var s string
		if json.Unmarshal(v, &s) == nil && len(s) >= 8 {
			r.hide = append(r.hide, s)
		}
	}
	if len(spec) == 0 {
		spec = json.RawMessage(`{}`)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(spec, &fields); err != nil {
		return nil, sdk.Invalid("request", "the request is not an object")
	}
	for name, v := range fields {
		if variableName.MatchString(name) && !slices.Contains(reserved, name) {
			vars[name] = v
		}
	}
	kept := map[string]string{}
	for k, v := range secrets {
		kept[k] = string(v)
		if len(v) >= 4 {
			r.hide = append(r.hide, string(v))
		}
	}
	fresh := fmt.Sprintf("%x", randomBytes(32))
	r.hide = append(r.hide, fresh)
	vars["tenant"], vars["instance"], vars["request"] = r.tenant, r.instance, string(spec)
	vars["secrets"], vars["new_secret"], vars["retain"] = kept, fresh, false
	return vars, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// secretsGiven reports whether the request brought back every secret of the type's
// result, so that the state's outputs need not be read for them.
func (r *run) secretsGiven() bool {
	shape, err := shapeOf(r.typ)
	if err != nil {
		return false
	}
	kept := r.vars["secrets"].(map[string]string)
	for field := range shape.secret {
		if _, ok := kept[secretName(field)]; !ok {
			return false
		}
	}
	return true
}

// keepSecretsOfState adds to the secrets variable the sensitive outputs the state holds
// from the last apply that the request did not bring back, so that a module that made a
// password keeps it when the host lost its copy.
func (r *run) keepSecretsOfState(ctx context.Context) error {
	outputs, err := r.tf.Output(ctx)
	if err != nil {
		return r.failed("output", err)
	}
	kept := r.vars["secrets"].(map[string]string)
	for field, out := range outputs {
		name := secretName(field)
		if _, given := kept[name]; given || !out.Sensitive {
			continue
		}
		var text string
		if json.Unmarshal(out.Value, &text) == nil && text != "" {
			kept[name] = text
			r.hide = append(r.hide, text)
		}
	}
	return nil
}

// writeVars writes the variables, 0600, for the next command; close removes it.
func (r *run) writeVars(retain bool) (string, error) {
	r.vars["retain"] = retain
	data, err := json.Marshal(r.vars)
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.dir, varFileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// close removes the run's directory: the copy, the variables and the plan, which holds
// their values.
func (r *run) close() { _ = os.RemoveAll(r.dir) }

// planAndApply plans; a plan that destroys or replaces a resource is refused naming its
// addresses; otherwise it is applied as planned. It reports whether anything changed.
func (r *run) planAndApply(ctx context.Context, retain bool) (bool, error) {
	varFile, err := r.writeVars(retain)
	if err != nil {
		return false, err
	}
	planPath := filepath.Join(r.dir, planName)
	changed, err := r.tf.Plan(ctx, tfexec.Out(planPath), tfexec.VarFile(varFile))
	if err != nil {
		return false, r.failed("plan", err)
	}
	if !changed {
		return false, nil
	}
	plan, err := r.tf.ShowPlanFile(ctx, planPath)
	if err != nil {
		return false, r.failed("show", err)
	}
	var doomed []string
	for _, rc := range plan.ResourceChanges {
		if rc.Change != nil && (rc.Change.Actions.Delete() || rc.Change.Actions.Replace()) {
			verb := "destroy"
			if rc.Change.Actions.Replace() {
				verb = "replace"
			}
			doomed = append(doomed, verb+" "+bounded(rc.Address, 256))
		}
	}
	if len(doomed) > 0 {
		sort.Strings(doomed)
		return false, sdk.Conflict("the plan of module %s for %s would %s, which the request still asks for: nothing was applied. "+
			"Change the module so that the change is made in place, or deprovision and provision again if losing it is meant",
			r.mod.Dir, r.workspace, strings.Join(doomed, ", "))
	}
	if err := r.tf.Apply(ctx, tfexec.DirOrPlan(planPath)); err != nil {
		return false, r.failed("apply", err)
	}
	return true, nil
}

func (r *run) destroy(ctx context.Context, retain bool) error {
	varFile, err := r.writeVars(retain)
	if err != nil {
		return err
	}
	if err := r.tf.Destroy(ctx, tfexec.VarFile(varFile)); err != nil {
		return r.failed("destroy", err)
	}
	return nil
}

var (
	exitStatus = regexp.MustCompile(`(?m)^exit status \d+\s*`)
	blankLines = regexp.MustCompile(`\n{3,}`)
)

// failed turns a terraform command's error into one a person reads: Terraform's
// diagnostics (with their file:line), the run's directory named as the module's, no
// secret value, bounded. Errors of init and plan are the module's (its configuration);
// those of apply and destroy are what it ran.
func (r *run) failed(step string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return sdk.Unavailable("terraform %s of module %s for %s did not finish within timeout (%s): its lock is released by Terraform, or as stale later", step, r.mod.Dir, r.workspace, r.cfg.timeout)
	}
	msg := err.Error()
	for _, h := range r.hide {
		if h != "" {
			msg = strings.ReplaceAll(msg, h, "(sensitive)")
		}
	}
	msg = strings.ReplaceAll(msg, r.dir, r.mod.Dir)
	msg = exitStatus.ReplaceAllString(msg, "")
	msg = blankLines.ReplaceAllString(strings.TrimSpace(msg), "\n\n")
	msg = bounded(msg, maxMessage)
	if strings.Contains(msg, "Error acquiring the state lock") {
		return sdk.Conflict("terraform %s of %s: another run holds the state's lock: %s", step, r.workspace, msg)
	}
	if step == "init" || step == "plan" {
		return sdk.Invalid(r.moduleField, "terraform %s of module %s failed: %s", step, r.mod.Dir, msg)
	}
	return sdk.Unavailable("terraform %s of module %s for %s failed: %s", step, r.mod.Dir, r.workspace, msg)
}

// copyModule copies the module's tree into dir, leaving out Terraform's own working
// files (.terraform, local state), bounded in size and count.
func copyModule(from, to string) error {
	var total int64
	files := 0
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if name == ".terraform" || name == ".git" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		if strings.HasPrefix(name, "terraform.tfstate") || name == backendFile || name == varFileName || name == cliConfig {
			return nil
		}
		info, err := os.Stat(path) // a link is copied as what it points to
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		files++
		total += info.Size()
		if files > maxModuleFiles || total > maxModuleBytes {
			return fmt.Errorf("the module is larger than %d files or %d MiB: keep only its configuration in the directory", maxModuleFiles, maxModuleBytes>>20)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, info.Mode().Perm()&0o700|0o600)
	})
}

// declaresVariable reports whether the module's top-level files declare variable name.
// A file that does not parse counts as not declaring it: terraform init says why.
func declaresVariable(dir, name string) bool {
	parser := hclparse.NewParser()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	schema := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "variable", LabelNames: []string{"name"}}}}
	for _, e := range entries {
		var f *hcl.File
		path := filepath.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".tf"):
			f, _ = parser.ParseHCLFile(path)
		case strings.HasSuffix(e.Name(), ".tf.json"):
			f, _ = parser.ParseJSONFile(path)
		}
		if f == nil {
			continue
		}
		content, _, _ := f.Body.PartialContent(schema)
		if content == nil {
			continue
		}
		for _, b := range content.Blocks {
			if b.Labels[0] == name {
				return true
			}
		}
	}
	return false
}
