// Package secretfile holds what both secret providers (embedded and openbao) share: the
// files of a secret request, how a value is generated, the public half of a key pair, and
// the reference that Reveal takes.
package secretfile

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// File is one file of a secret request.
type File struct {
	Name string
	// Generate is nil for a supplied file.
	Generate *contract.Generate
}

// Generator names how the value of f is made ("alphanumeric:24", "ed25519", ...), or
// "supplied". A stored value whose generator differs is replaced by a new version.
func (f File) Generator() string {
	g := f.Generate
	switch {
	case g == nil:
		return "supplied"
	case g.KeyPair != "":
		return g.KeyPair
	default:
		return encodingOf(g) + ":" + strconv.Itoa(g.Length)
	}
}

// Files reads a secret request (already checked against the contract) into its files,
// sorted by name.
func Files(spec json.RawMessage) ([]File, error) {
	var req contract.SecretRequest
	if err := json.Unmarshal(spec, &req); err != nil {
		return nil, sdk.Invalid("request", "the secret request is not an object with files: %v", err)
	}
	files := make([]File, 0, len(req.Files))
	for name, f := range req.Files {
		if !namePattern.MatchString(name) {
			return nil, sdk.Invalid("request/files/"+name, "file name %q is not lower case letters, digits and dashes starting with a letter", name)
		}
		files = append(files, File{Name: name, Generate: f.Generate})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// Supplied returns the operator's value of a supplied file from the request's secrets.
func Supplied(f File, secrets map[string][]byte) ([]byte, error) {
	v, ok := secrets[f.Name]
	if !ok || len(v) == 0 {
		return nil, sdk.Invalid("request/files/"+f.Name, "file %q is supplied: supply a value for it in the secrets of the request", f.Name)
	}
	return v, nil
}

// Stored is the latest version of a file as a provider keeps it.
type Stored struct {
	Version   int
	Generator string
	Value     []byte
}

// Want decides what to store for f given its latest stored version (nil for none): it
// returns the new value, or nil when the stored version stands. A supplied value that
// differs, or a generator that changed, makes a new version; a generated value is
// otherwise kept for good.
func Want(f File, latest *Stored, secrets map[string][]byte) ([]byte, error) {
	if f.Generate == nil {
		v, err := Supplied(f, secrets)
		if err != nil {
			return nil, err
		}
		if latest != nil && latest.Generator == f.Generator() && subtle.ConstantTimeCompare(latest.Value, v) == 1 {
			return nil, nil
		}
		return bytes.Clone(v), nil
	}
	if latest != nil && latest.Generator == f.Generator() {
		return nil, nil
	}
	return Generate(*f.Generate)
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Ref is what a reference names: one version of one file of one instance.
type Ref struct {
	Tenant, Instance, File string
	Version                int
}

// String gives the reference as results carry it: <tenant>/<instance>/<file>@v<N>.
func (r Ref) String() string {
	return fmt.Sprintf("%s/%s/%s@v%d", r.Tenant, r.Instance, r.File, r.Version)
}

// ParseRef reads a reference; ok is false for anything that is not one. Every part is
// checked against the name patterns, so a reference can never name a path outside its
// instance.
func ParseRef(s string) (r Ref, ok bool) {
	path, ver, found := strings.Cut(s, "@v")
	if !found {
		return Ref{}, false
	}
	n, err := strconv.Atoi(ver)
	if err != nil || n < 1 || strconv.Itoa(n) != ver {
		return Ref{}, false
	}
	parts := strings.Split(path, "/")
	if len(parts) != 3 || !sdk.ValidTenant(parts[0]) || !sdk.ValidInstance(parts[1]) || !namePattern.MatchString(parts[2]) {
		return Ref{}, false
	}
	return Ref{Tenant: parts[0], Instance: parts[1], File: parts[2], Version: n}, true
}

// Result builds the secret result of files from their stored versions.
func Result(tenant, instance string, files []File, stored map[string]Stored) (json.RawMessage, error) {
	res := contract.SecretResult{Files: map[string]contract.SecretFileResult{}}
	for _, f := range files {
		s := stored[f.Name]
		fr := contract.SecretFileResult{
			Ref:     Ref{Tenant: tenant, Instance: instance, File: f.Name, Version: s.Version}.String(),
			Version: s.Version,
		}
		if f.Generate != nil && f.Generate.KeyPair != "" {
			pub, err := PublicPEM(s.Value)
			if err != nil {
				return nil, fmt.Errorf("file %q of %s/%s: %w", f.Name, tenant, instance, err)
			}
			fr.Public = pub
		}
		res.Files[f.Name] = fr
	}
	return json.Marshal(res)
}

// NotFound is the one answer Reveal gives for a reference the instance may not read,
// whether or not it exists.
func NotFound(tenant, instance, ref string) error {
	return sdk.NotFound("instance %s/%s has no secret %q", tenant, instance, ref)
}
