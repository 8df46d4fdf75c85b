package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// renewalRetry is how long after a deploy build that did not renew a due certificate
// the scheduler tries again: a CA that refuses is not asked at every tick.
const renewalRetry = time.Hour

// runRenewals renews the certificates due at now: for each active deployment (or
// failed, whose old certificate is served all the same) with a tls row whose renew_after
// has passed, a deploy build of its stored configuration at its catalog revision, the
// build a submit makes: the tls provider issues anew because the certificate is due, the
// route takes it, every other step only checks. Not while a build of the deployment is
// queued or running, and not within an hour of a deploy build made since the
// certificate was due, so a renewal that failed is tried again once an hour.
//
// tickRenewals gives it the rows the database says are due (store.DueCertificates, by
// the renew_after column) and their deployments.
func (e *Engine) tickRenewals(ctx context.Context, now time.Time) ([]store.Build, error) {
	rows, err := e.opts.Store.DueCertificates(ctx, now, backedUpStates)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	ids := make([]string, 0, len(rows))
	for i, row := range rows {
		if i == 0 || rows[i-1].DeploymentID != row.DeploymentID {
			ids = append(ids, row.DeploymentID)
		}
	}
	ds, err := e.opts.Store.DeploymentsByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	return e.runRenewals(ctx, now, ds, rows)
}

// runRenewals decides on ds, with rows their tls resources.
func (e *Engine) runRenewals(ctx context.Context, now time.Time, ds []store.Deployment, rows []store.Resource) ([]store.Build, error) {
	due := map[string][]certificate{}
	for _, row := range rows {
		if c, ok := readCertificate(row); ok && !now.Before(c.renewAfter) {
			due[row.DeploymentID] = append(due[row.DeploymentID], c)
		}
	}
	if len(due) == 0 {
		return nil, nil
	}
	busy, err := e.opts.Store.BusyDeployments(ctx)
	if err != nil {
		return nil, err
	}
	actx := audit.WithActor(ctx, audit.Actor{ID: "scheduler", Issuer: audit.IssuerScheduler})
	var queued []store.Build
	var errs []error
	for _, d := range ds {
		certs := due[d.ID]
		if len(certs) == 0 || busy[d.ID] || (d.State != StateActive && d.State != StateFailed) {
			continue
		}
		sort.Slice(certs, func(i, j int) bool { return certs[i].renewAfter.Before(certs[j].renewAfter) })
		builds, err := e.opts.Store.ListBuilds(ctx, d.ID, RecentBuilds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b, ok := lastDeploy(builds); ok && !b.CreatedAt.Before(certs[0].renewAfter) && now.Sub(b.CreatedAt) < renewalRetry {
			continue
		}
		b, err := e.enqueue(actx, d, store.OperationDeploy, json.RawMessage(d.Config), e.storedRefs(d), e.revisionFor(d, false))
		ev := audit.Event{Action: "certificate_renewal", DeploymentID: d.ID, Result: audit.ResultOK, Reason: renewalHosts(certs)}
		if err != nil {
			// A build of the deployment started meanwhile, or the queue is full: the next tick.
			ev.Result, ev.Reason = audit.ResultError, ev.Reason+" not queued: "+errorCode(err)
			e.log.Warn("certificate renewal not queued", "deployment", d.ID, "error", err)
		} else {
			ev.BuildID = b.ID
			queued = append(queued, b)
			e.log.Info("certificate renewal queued", "deployment", d.ID, "hosts", ev.Reason, "build", b.ID)
		}
		if e.opts.Audit != nil {
			if err := e.opts.Audit.Record(actx, ev); err != nil {
				e.log.Error("recording a certificate renewal", "error", err)
			}
		}
	}
	return queued, errors.Join(errs...)
}

// renewalHosts names the host names of certificates, for the audit trail.
func renewalHosts(certs []certificate) string {
	hosts := make([]string, 0, len(certs))
	for _, c := range certs {
		hosts = append(hosts, c.host)
	}
	return strings.Join(hosts, " ")
}

// noteRenewals says at the start of a deploy build which certificates it renews: those
// due at its start, which the tls provider issues anew.
func (r *run) noteRenewals() {
	now := r.e.now()
	names := make([]string, 0, len(r.rows))
	for name := range r.rows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if c, ok := readCertificate(r.rows[name]); ok && !now.Before(c.renewAfter) {
			r.event(store.LevelInfo, "renewal", 1, "renewing the certificate of %s, due since %s", c.host, c.renewAfter.Format(time.RFC3339))
		}
	}
}

// CertificateExpiry is when the soonest certificate of a deployment's app expires.
type CertificateExpiry struct {
	DeploymentID, App string
	NotAfter          time.Time
}

// CertificateExpiries returns, for every app with a provisioned certificate, when its
// soonest one expires, by deployment and app: one query, for the metrics.
func (e *Engine) CertificateExpiries(ctx context.Context) ([]CertificateExpiry, error) {
	rows, err := e.opts.Store.ResultsOfType(ctx, contract.TLS)
	if err != nil {
		return nil, err
	}
	var out []CertificateExpiry
	index := map[[2]string]int{}
	for _, row := range rows {
		c, ok := readCertificate(row)
		if !ok {
			continue
		}
		key := [2]string{row.DeploymentID, row.App}
		if i, seen := index[key]; seen {
			if c.notAfter.Before(out[i].NotAfter) {
				out[i].NotAfter = c.notAfter
			}
			continue
		}
		index[key] = len(out)
		out = append(out, CertificateExpiry{DeploymentID: row.DeploymentID, App: row.App, NotAfter: c.notAfter})
	}
	return out, nil
}
