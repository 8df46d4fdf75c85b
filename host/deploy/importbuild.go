package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

// importConfirmPointer keeps, once an import's data is restored and its pointers are
// deleted, what the confirmation to the source needs (the migration id, the source's URL
// and its token) until the source answers it: every build tries again until then.
const importConfirmPointer = "/migration-confirm"

// confirmTimeout bounds the confirmation request to the source: above the source's
// confirmWait (export.go), the time it waits for its revoke-export build.
const confirmTimeout = 30 * time.Second

// importTransferPointer keeps a confirmed transfer's auth code, with the operator's
// confirmation, from the import until the registrar accepted or refused the transfer:
// longer than the pointers when the registrar does not answer the first build.
const importTransferPointer = "/migration-transfer"

// importTransfer is the value kept at importTransferPointer.
type importTransfer struct {
	Domain      string `json:"domain"`
	AuthCode    string `json:"auth_code"`
	Registrar   string `json:"registrar"`
	ContactID   string `json:"contact_id,omitempty"`
	PriceMicros int64  `json:"price_micros"`
	Currency    string `json:"currency"`
}

// importConfirm is the value kept at importConfirmPointer.
type importConfirm struct {
	ID        string `json:"id"`
	SourceURL string `json:"source_url"`
	Token     string `json:"token"`
}

// importInstances are the secret instances that keep an import's values, by the pointer
// of their reference among the deployment's: instances of their own, since deprovisioning
// an instance is what deletes its values (a secret instance keeps the files dropped from
// its request).
var importInstances = map[string]string{importPointer: "fedhost-import", importConfirmPointer: "fedhost-import-confirm",
	importTransferPointer: "fedhost-import-transfer"}

// keepImport keeps value in the secret instance of pointer and returns its reference.
func (e *Engine) keepImport(ctx context.Context, d store.Deployment, pointer, value string) (string, error) {
	refs, err := e.keep(ctx, d.Namespace, importInstances[pointer], map[string]contract.SecretFile{"value": {Supplied: true}}, map[string][]byte{"value": []byte(value)})
	if err != nil {
		return "", err
	}
	return refs["value"], nil
}

// dropImport deletes the secret instance of pointer with every version of its value.
func (e *Engine) dropImport(ctx context.Context, d store.Deployment, pointer string) error {
	c, _, err := e.route(contract.Secret)
	if err != nil {
		return err
	}
	return c.Deprovision(ctx, resource.DeprovisionRequest{Tenant: d.Namespace, Instance: importInstances[pointer], Type: contract.Secret})
}

// loadImport reads an imported deployment's pointers (importPointer), its pending
// confirmation (importConfirmPointer) and its confirmed transfer (importTransferPointer)
// from the secret resource; each nil when it has none. A reference whose instance an
// earlier build deleted (a submit that raced it stored the references it had read) is
// dropped from refs with a warning: that part of the import is done.
func (r *run) loadImport(ctx context.Context, refs map[string]string) (*Pending, *importConfirm, *importTransfer, error) {
	var p *Pending
	var c *importConfirm
	var t *importTransfer
	for _, pointer := range []string{importPointer, importConfirmPointer, importTransferPointer} {
		ref, ok := refs[pointer]
		if !ok {
			continue
		}
		raw, err := r.e.reveal(ctx, r.d.Namespace, importInstances[pointer], ref)
		if sdk.CodeOf(err) == sdk.CodeNotFound {
			r.event(store.LevelWarn, "import", 2, "the import's %s deleted by an earlier build: forgotten",
				map[string]string{importPointer: "pointers were", importConfirmPointer: "confirmation was", importTransferPointer: "auth code was"}[pointer])
			delete(refs, pointer)
			if err := r.setRefs(ctx, refs); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("the import's values in the secret resource: %w", err)
		}
		switch pointer {
		case importPointer:
			p = &Pending{}
			err = json.Unmarshal(raw, p)
		case importConfirmPointer:
			c = &importConfirm{}
			err = json.Unmarshal(raw, c)
		default:
			t = &importTransfer{}
			err = json.Unmarshal(raw, t)
		}
		if err != nil {
			return nil, nil, nil, errors.New("the import's values in the secret resource are not readable: import the migration string again")
		}
	}
	return p, c, t, nil
}

// importGroups adds the import's groups to the directory's request, so that the ldap
// provider makes them with the app's groups (it only adds groups: they stay after the
// import). A name this directory does not take is a warning.
func (r *run) importGroups(ctx context.Context, id *identity) error {
	if r.imported == nil || r.imported.Directory == nil || id.Directory == nil {
		return nil
	}
	var req contract.LDAPRequest
	if err := json.Unmarshal(id.Directory.Spec, &req); err != nil {
		return err
	}
	for _, g := range r.imported.Directory.Groups {
		if err := directory.CheckGroupName("name", g.Name); err != nil {
			r.event(store.LevelWarn, "import", 5, "group %s of the source is not made: %v", bounded(g.Name, 64), err)
			continue
		}
		req.Groups = append(req.Groups, g.Name)
	}
	slices.Sort(req.Groups)
	req.Groups = slices.Compact(req.Groups)
	spec, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := id.Directory.client.Validate(ctx, contract.LDAP, spec); err != nil {
		return fmt.Errorf("the deployment's directory with the import's groups: %w", err)
	}
	id.Directory.Spec = spec
	return nil
}

// restoreImported restores an imported app's database from the source's final snapshot,
// reading the source's bucket with the migration string's read-only key (restic without
// locks, which the key cannot write). It runs once the app's resources exist and before
// its nodes start; an app the import brought no data for is left alone.
func (r *run) restoreImported(ctx context.Context, app string, progress int) error {
	if r.imported == nil {
		return nil
	}
	data, ok := r.imported.Apps[app]
	if !ok {
		return nil
	}
	db, err := r.database(ctx, app)
	if err != nil {
		return fmt.Errorf("restore of %s from the source: %w", app, err)
	}
	t := backup.Target{Endpoint: data.S3.Endpoint, Region: data.S3.Region, PathStyle: data.S3.PathStyle, Bucket: data.S3.Bucket, Path: data.S3.Path,
		AccessKeyID: data.S3.AccessKeyID, SecretAccessKey: data.S3.SecretAccessKey, RepositoryPassword: data.RepositoryPassword, NoLock: true}
	r.event(store.LevelInfo, "import", progress, "restoring %s from the source's snapshot %s into %s", app, bounded(data.Snapshot, 64), db.Database)
	if err := backup.Restore(ctx, t, data.Snapshot, db, ""); err != nil {
		// backup hides the key, the repository password and the database's password.
		return fmt.Errorf("restore of %s from the source's snapshot %s: %w; the import's pointers are kept, so the next submit restores again", app, bounded(data.Snapshot, 64), err)
	}
	r.event(store.LevelInfo, "import", progress, "%s restored from the source's snapshot %s", app, bounded(data.Snapshot, 64))
	return nil
}

// importUsers makes the source's users in the deployment's directory with the password
// hashes the source stored, in the source's groups; a user that exists is left alone,
// so that a second build does not fail. A user this directory refuses (its name or hash)
// is a warning; a directory that does not answer fails the build.
func (r *run) importUsers(ctx context.Context) error {
	if r.imported == nil || r.imported.Directory == nil || len(r.imported.Directory.Users) == 0 {
		return nil
	}
	if !r.e.has(contract.LDAP) {
		r.event(store.LevelWarn, "import", 92, "%d users of the source are not made: this hosting provider's environment has no directory (ldap provider)", len(r.imported.Directory.Users))
		return nil
	}
	res, pw, err := r.e.Directory(ctx, r.d.ID)
	if err != nil {
		return fmt.Errorf("the source's users: %w", err)
	}
	dir, err := directory.New(res, pw)
	if err != nil {
		return err
	}
	made, existing := 0, 0
	for _, u := range r.imported.Directory.Users {
		du := directory.User{Name: u.Name, DisplayName: u.DisplayName, Email: u.Email}
		for _, g := range r.imported.Directory.Groups {
			if slices.Contains(g.Members, u.Name) && directory.CheckGroupName("name", g.Name) == nil {
				du.Groups = append(du.Groups, g.Name)
			}
		}
		if u.PasswordHash == "" {
			err = dir.Add(du)
		} else {
			err = dir.AddWithHash(du, u.PasswordHash)
		}
		var de *directory.Error
		switch {
		case errors.As(err, &de) && de.Code == directory.CodeConflict:
			existing++
			continue
		case errors.As(err, &de):
			// The directory's refusal names the field, never the value.
			r.event(store.LevelWarn, "import", 92, "user %s of the source is not made: %v", bounded(u.Name, 64), err)
			continue
		case err != nil:
			return fmt.Errorf("the source's users: %w", err)
		}
		if u.Disabled {
			if err := dir.SetDisabled(u.Name, true); err != nil {
				return fmt.Errorf("the source's users: locking %s: %w", bounded(u.Name, 64), err)
			}
		}
		made++
	}
	r.event(store.LevelInfo, "import", 93, "%d users of the source made in the directory with their passwords, %d there already", made, existing)
	return nil
}

// importDomain transfers the imported domain to this fedhost's registrar with the
// string's auth code once the operator confirmed the transfer's price and contact at the
// import: after the restore and the users, through TransferDomainIn (under the key it
// records first, so that asking again never transfers or charges twice). The auth code
// is deleted from the secret resource once the registrar accepted or refused the
// transfer; a registrar that does not answer keeps it for the next build, with a warning.
// Without a confirmation the operator delegates the domain (the domain step names the
// nameservers).
func (r *run) importDomain(ctx context.Context, refs map[string]string) error {
	t := r.transfer
	if t == nil {
		if r.imported == nil || r.imported.Domain.Name == "" {
			return nil
		}
		dom := r.imported.Domain
		if registrars := r.e.Registrars(); dom.AuthCode != "" && len(registrars) > 0 {
			r.event(store.LevelWarn, "domain", 94, "the transfer of %s to %s was not confirmed with the import: delegate it (the domain step names the nameservers), or transfer it with fedhost domains transfer and an auth code of its registrar", bounded(dom.Name, 253), registrars[0])
			return nil
		}
		r.event(store.LevelWarn, "domain", 94, "%s came from the source: delegate it here by setting its nameservers to the ones the deployment's Domains page names", bounded(dom.Name, 253))
		return nil
	}
	st := r.e.opts.Store
	name := bounded(t.Domain, 253)
	rec, err := st.GetDomain(ctx, t.Domain)
	switch {
	case err == nil && rec.DeploymentID == r.d.ID && rec.Mode == store.DomainRegistered && rec.State != DomainTransferring:
		// An earlier build's transfer was answered; only the deletion of the code failed.
		return r.dropTransfer(ctx, refs)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return err
	}
	r.event(store.LevelInfo, "domain", 94, "transferring %s to %s for %s with the source's auth code", name, t.Registrar, price(t.PriceMicros, t.Currency))
	rec, err = r.e.TransferDomainIn(ctx, r.d.ID, TransferConfirmation{AuthCode: t.AuthCode,
		Confirmation: Confirmation{Registrar: t.Registrar, Domain: t.Domain, ContactID: t.ContactID, PriceMicros: t.PriceMicros, Currency: t.Currency}})
	var he *Error
	switch {
	case errors.As(err, &he) && he.Code == CodeUnavailable:
		// TransferDomainIn's messages never hold the auth code.
		if uerr := st.UpdateDomain(ctx, t.Domain, map[string]any{"message": bounded(he.Message+" (the import keeps the auth code for it)", maxDomainMessage)}); uerr != nil && !errors.Is(uerr, store.ErrNotFound) {
			return uerr
		}
		r.event(store.LevelWarn, "domain", 94, "the transfer of %s is not asked for yet: %s (the import keeps the auth code for it)", name, he.Message)
		return nil
	case err != nil:
		r.event(store.LevelWarn, "domain", 94, "the transfer of %s to %s is refused: %s; the import's auth code is deleted: delegate the domain, or transfer it with fedhost domains transfer and an auth code of its registrar", name, t.Registrar, hostMessage(err))
	case rec.State == DomainTransferFailed:
		r.event(store.LevelWarn, "domain", 94, "the registry refused the transfer of %s to %s: %s; the import's auth code is deleted", name, t.Registrar, rec.Message)
	default:
		r.event(store.LevelInfo, "domain", 94, "registrar %s took the transfer of %s (%s): the next build follows it, then sets the nameservers and the lock", t.Registrar, name, bounded(rec.State, 32))
	}
	return r.dropTransfer(ctx, refs)
}

// dropTransfer forgets the import's transfer and deletes its auth code from the secret
// resource: the reference is dropped from refs (the build's own map) and the deployment.
func (r *run) dropTransfer(ctx context.Context, refs map[string]string) error {
	r.transfer = nil
	delete(refs, importTransferPointer)
	if err := r.setRefs(ctx, refs); err != nil {
		return fmt.Errorf("deleting the import's auth code: %w", err)
	}
	if err := r.e.dropImport(ctx, r.d, importTransferPointer); err != nil {
		r.event(store.LevelWarn, "domain", 94, "the import's auth code is no longer used but the secret resource did not delete it (%v): deprovision its instance %s", err, importInstances[importTransferPointer])
		return nil
	}
	r.event(store.LevelInfo, "domain", 94, "the import's auth code is deleted from the secret resource")
	return nil
}

// finishImport deletes the import's pointers once every app is restored and the users
// are made, keeping only what the confirmation needs, then confirms to the source; a
// confirmation that fails is a warning, tried again by the next build.
func (r *run) finishImport(ctx context.Context, refs map[string]string, pending *importConfirm) error {
	refs = maps.Clone(refs)
	if r.imported != nil {
		c := importConfirm{ID: r.imported.ID, SourceURL: r.imported.SourceURL, Token: r.imported.ConfirmToken}
		raw, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if refs[importConfirmPointer], err = r.e.keepImport(ctx, r.d, importConfirmPointer, string(raw)); err != nil {
			return fmt.Errorf("keeping the import's confirmation: %w", err)
		}
		delete(refs, importPointer)
		if err := r.setRefs(ctx, refs); err != nil {
			return fmt.Errorf("deleting the import's pointers: %w", err)
		}
		if err := r.e.dropImport(ctx, r.d, importPointer); err != nil {
			r.event(store.LevelWarn, "import", 95, "the import's pointers are no longer used but the secret resource did not delete them (%v): deprovision its instance %s", err, importInstances[importPointer])
		} else {
			r.event(store.LevelInfo, "import", 95, "the import's pointers (keys, repository passwords, password hashes) are deleted from the secret resource")
		}
		pending = &c
	}
	if pending == nil {
		return nil
	}
	if err := confirmImport(ctx, *pending); err != nil {
		r.event(store.LevelWarn, "import", 96, "the source was not told the import is done (%v): the next build tells it again", err)
		return nil
	}
	r.event(store.LevelInfo, "import", 96, "the source confirmed the import of migration %s: it revokes its read-only keys", bounded(pending.ID, 64))
	delete(refs, importConfirmPointer)
	if err := r.setRefs(ctx, refs); err != nil {
		r.event(store.LevelWarn, "import", 96, "the import's confirmation token is not forgotten (%v): the next build confirms again", err)
		return nil
	}
	if err := r.e.dropImport(ctx, r.d, importConfirmPointer); err != nil {
		r.event(store.LevelWarn, "import", 96, "the secret resource did not delete the import's confirmation token (%v): deprovision its instance %s", err, importInstances[importConfirmPointer])
	}
	return nil
}

// setRefs records the deployment's secret references.
func (r *run) setRefs(ctx context.Context, refs map[string]string) error {
	raw, err := json.Marshal(refs)
	if err != nil {
		return err
	}
	if err := r.e.opts.Store.UpdateDeployment(ctx, r.d.ID, map[string]any{"secret_refs": string(raw)}); err != nil {
		return err
	}
	r.d.SecretRefs = string(raw)
	return nil
}

// confirmImport posts {id, token} to the source's /api/v1/migration/confirm. The error
// names the status or the failure, never the token.
func confirmImport(ctx context.Context, c importConfirm) error {
	u, err := url.Parse(c.SourceURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("the source's url in the migration string is not an http(s) URL")
	}
	body, err := json.Marshal(map[string]string{"id": c.ID, "token": c.Token})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(u.String(), "/")+"/api/v1/migration/confirm", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("the source at %s does not answer: %v", bounded(u.Host, 253), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the source at %s answered %s", bounded(u.Host, 253), bounded(resp.Status, 64))
	}
	return nil
}
