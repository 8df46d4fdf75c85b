// Package scalegen fills a fedhost store on PostgreSQL with many deployments, for the
// benchmarks that measure a host at 10,000 and 100,000 deployments (docs/benchmarks.md).
//
// Each deployment belongs to one of a few hundred operators and has what a deployment
// that has lived a while has: a configuration with one app, the resources of that app
// (an instance, a database, a bucket, a certificate, a route), several finished builds
// with tens of events each, the app's backup record and audit events of its submits.
// Rows go in with PostgreSQL's COPY (pgx CopyFrom), a batch of deployments at a time, so
// 10,000 deployments take a minute or two and 100,000 are feasible.
//
// The schema is the store's own: Fill opens the database with store.Open first, which
// migrates it, and writes the columns of the store's types. The audit events are chained
// with audit.Hash and the chain's head is updated, so the trail verifies.
package scalegen

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
)

// Options say how much to generate. Zero values take the defaults.
type Options struct {
	// Deployments to create; required.
	Deployments int
	// Operators own them round-robin; 300 by default.
	Operators int
	// BuildsPerDeployment finished builds each, EventsPerBuild events each; 4 and 25.
	BuildsPerDeployment int
	EventsPerBuild      int
	// Batch is how many deployments one round of COPY writes; 1,000 by default.
	Batch int
}

// Filled is what a benchmark needs to read the store as its users.
type Filled struct {
	// SuperuserToken and OperatorToken are API tokens ("fh_..."), SuperuserSession and
	// OperatorSession the values of the fedhost_session cookie. Operator is the
	// operator's name; it owns Deployments/Operators deployments, among them Deployment.
	SuperuserToken, SuperuserSession string
	OperatorToken, OperatorSession   string
	Operator, OperatorID             string
	// Deployment is the ID of one of Operator's deployments, a typical one.
	Deployment string
}

// Fill migrates the database at dsn and adds the deployments opts ask for, their
// owners, and a superuser "scale-root", each with a token and a session valid for a day.
func Fill(ctx context.Context, dsn string, opts Options) (Filled, error) {
	if opts.Deployments <= 0 {
		return Filled{}, fmt.Errorf("scalegen: Deployments must be at least 1")
	}
	if opts.Operators <= 0 {
		opts.Operators = 300
	}
	if opts.BuildsPerDeployment <= 0 {
		opts.BuildsPerDeployment = 4
	}
	if opts.EventsPerBuild <= 0 {
		opts.EventsPerBuild = 25
	}
	if opts.Batch <= 0 {
		opts.Batch = 1000
	}
	st, err := store.Open(ctx, store.Config{Database: dsn})
	if err != nil {
		return Filled{}, err
	}
	st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Filled{}, fmt.Errorf("scalegen: connecting: %w", err)
	}
	defer conn.Close(ctx)
	g := &gen{conn: conn, opts: opts, start: time.Now().UTC().Truncate(time.Microsecond).Add(-30 * 24 * time.Hour)}
	g.recent = time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	// At the newest revision the host recorded, so that no automatic update is due; a
	// store no host has opened yet gets a revision of its own.
	if err := conn.QueryRow(ctx, `SELECT COALESCE((SELECT id FROM catalog_revisions ORDER BY created_at DESC LIMIT 1), 'scalegen')`).Scan(&g.revision); err != nil {
		return Filled{}, fmt.Errorf("scalegen: reading the catalog revision: %w", err)
	}
	if err := g.chainHead(ctx); err != nil {
		return Filled{}, err
	}
	out, err := g.users(ctx)
	if err != nil {
		return Filled{}, err
	}
	for from := 0; from < opts.Deployments; from += opts.Batch {
		n := min(opts.Batch, opts.Deployments-from)
		first, err := g.deployments(ctx, from, n)
		if err != nil {
			return Filled{}, err
		}
		if out.Deployment == "" {
			out.Deployment = first
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE audit_chain SET last_seq = $1, last_hash = $2 WHERE id = 1`, g.seq, g.hash); err != nil {
		return Filled{}, fmt.Errorf("scalegen: moving the audit chain's head: %w", err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		return Filled{}, fmt.Errorf("scalegen: analyze: %w", err)
	}
	return out, nil
}

type gen struct {
	conn      *pgx.Conn
	opts      Options
	start     time.Time
	operators []string // user IDs
	names     []string
	seq       int64 // the audit chain's head
	hash      string
	revision  string    // the catalog revision every deployment is at
	recent    time.Time // when each app was last backed up and drilled
}

func (g *gen) chainHead(ctx context.Context) error {
	return g.conn.QueryRow(ctx, `SELECT last_seq, last_hash FROM audit_chain WHERE id = 1`).Scan(&g.seq, &g.hash)
}

// secret is 32 random bytes, base64url without padding: what auth makes of tokens and sessions.
func secret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// users adds the operators, the superuser, and a token and session for the superuser
// and the first operator.
func (g *gen) users(ctx context.Context) (Filled, error) {
	// Nobody signs in with a password here: one hash of a random one serves every account.
	hash := auth.HashPassword(rand.Text(), auth.DefaultParams)
	now := time.Now().UTC().Truncate(time.Microsecond)
	var rows [][]any
	rootID := uuid.Must(uuid.NewV7()).String()
	rows = append(rows, []any{rootID, "scale-root", hash, true, false, false, now, now})
	for i := 0; i < g.opts.Operators; i++ {
		id := uuid.Must(uuid.NewV7()).String()
		name := fmt.Sprintf("operator-%03d", i)
		g.operators = append(g.operators, id)
		g.names = append(g.names, name)
		rows = append(rows, []any{id, name, hash, false, false, false, now, now})
	}
	if _, err := g.conn.CopyFrom(ctx, pgx.Identifier{"users"},
		[]string{"id", "name", "password_hash", "superuser", "disabled", "must_change_password", "created_at", "updated_at"},
		pgx.CopyFromRows(rows)); err != nil {
		return Filled{}, fmt.Errorf("scalegen: users: %w", err)
	}
	out := Filled{Operator: g.names[0], OperatorID: g.operators[0]}
	for _, c := range []struct {
		user           string
		token, session *string
	}{{rootID, &out.SuperuserToken, &out.SuperuserSession}, {g.operators[0], &out.OperatorToken, &out.OperatorSession}} {
		*c.token = auth.TokenPrefix + secret()
		*c.session = secret()
		if _, err := g.conn.Exec(ctx, `INSERT INTO api_tokens (id, token_hash, name, user_id, created_at, expires_at) VALUES ($1, $2, 'scalegen', $3, $4, $5)`,
			uuid.Must(uuid.NewV7()).String(), digest(*c.token), c.user, now, now.Add(24*time.Hour)); err != nil {
			return Filled{}, fmt.Errorf("scalegen: token: %w", err)
		}
		if _, err := g.conn.Exec(ctx, `INSERT INTO sessions (id_hash, user_id, csrf_token, created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $4, $5)`,
			digest(*c.session), c.user, rand.Text(), now, now.Add(24*time.Hour)); err != nil {
			return Filled{}, fmt.Errorf("scalegen: session: %w", err)
		}
	}
	return out, nil
}

// policies cycle over the deployments, so that the tick has each kind to evaluate.
var policies = []struct{ policy, start string }{{"manual", ""}, {"automatic", ""}, {"window", "03:00"}, {"manual", ""}}

// deployments writes deployments from..from+n-1 and all their rows, and returns the first ID.
func (g *gen) deployments(ctx context.Context, from, n int) (string, error) {
	var deps, builds, events, resources, backups, audits [][]any
	var first string
	for i := from; i < from+n; i++ {
		// UUIDv7 in the order of creation, as the store makes them: the lists page by ID.
		created := g.start.Add(time.Duration(i) * time.Second)
		id := idAt(created)
		if first == "" {
			first = id
		}
		owner := g.operators[i%len(g.operators)]
		ns := fmt.Sprintf("d%06d", i)
		domain := ns + ".example.test"
		config := fmt.Sprintf(`{"domain":%q,"apps":{"miniflux":{"enable":true,"options":{"admin_user":"admin","polling_frequency":60,"batch_size":100}}}}`, domain)
		p := policies[i%len(policies)]
		window := 0
		if p.policy == "window" {
			window = 120
		}
		updated := created.Add(time.Duration(g.opts.BuildsPerDeployment) * time.Hour)
		deps = append(deps, []any{id, ns, ns, owner, domain, "active", g.revision, config, "{}", "", p.policy, p.start, window, "Europe/Berlin", "", created, updated})
		for b := 0; b < g.opts.BuildsPerDeployment; b++ {
			at := created.Add(time.Duration(b) * time.Hour)
			bid := idAt(at.Add(time.Millisecond))
			started, finished := at.Add(time.Second), at.Add(time.Minute)
			builds = append(builds, []any{bid, id, "succeeded", "", at, started, finished, "deploy", config, int64(0), g.revision})
			for e := 1; e <= g.opts.EventsPerBuild; e++ {
				events = append(events, []any{bid, e, started.Add(time.Duration(e) * time.Second), "provision", "info",
					fmt.Sprintf("miniflux-db: postgresql resource provisioned (step %d of %d)", e, g.opts.EventsPerBuild), e * 100 / g.opts.EventsPerBuild})
			}
			audits = append(audits, g.audit(at, owner, "deployment.submit", id, bid))
		}
		for _, r := range []struct{ name, typ, provider string }{
			{"miniflux-app", "instance", "local"}, {"miniflux-db", "postgresql", "postgresql"},
			{"miniflux-backups", "s3", "versitygw"}, {"miniflux-cert", "tls", "localca"}, {"miniflux-route", "route", "caddy"},
		} {
			spec := fmt.Sprintf(`{"name":%q,"namespace":%q}`, r.name, ns)
			result := fmt.Sprintf(`{"host":"127.0.0.1","name":"%s-%s","password":{"ref":"%s/%s/password"}}`, ns, r.name, ns, r.name)
			var renewAfter any
			if r.typ == "tls" {
				// A certificate of 90 days issued when the deployment was last built, due
				// for renewal 30 days before it expires: not due at the next tick.
				notAfter, renew := updated.Add(90*24*time.Hour).Truncate(time.Second), updated.Add(60*24*time.Hour).Truncate(time.Second)
				result = fmt.Sprintf(`{"certificate":"-----BEGIN CERTIFICATE-----\nscalegen\n-----END CERTIFICATE-----\n","key":{"ref":"%s/%s/key"},"not_after":%q,"issuer":"scalegen CA","renew_after":%q}`,
					ns, r.name, notAfter.Format(time.RFC3339), renew.Format(time.RFC3339))
				renewAfter = renew
			}
			resources = append(resources, []any{id, r.name, "miniflux", r.typ, r.provider, spec, digest(spec), result, ns + "-secrets", "{}", "provisioned", nil, renewAfter, updated})
		}
		// Backed up and drilled a minute ago: nothing is due at the next tick, which
		// measures the evaluation, not the builds it would queue.
		backups = append(backups, []any{id, "miniflux", created, g.recent, "", "scheduled", g.recent, "snap-" + ns, "", 0, g.recent, g.recent})
	}
	for _, t := range []struct {
		table   string
		columns []string
		rows    [][]any
	}{
		{"deployments", []string{"id", "namespace", "name", "owner", "domain", "state", "catalog_revision", "config", "secret_refs", "last_auto_revision",
			"update_policy", "update_window_start", "update_window_minutes", "time_zone", "node_host", "created_at", "updated_at"}, deps},
		{"builds", []string{"id", "deployment_id", "state", "reason", "created_at", "started_at", "finished_at", "operation", "config", "job_id", "catalog_revision"}, builds},
		{"build_events", []string{"build_id", "seq", "time", "step", "level", "message", "progress"}, events},
		{"resources", []string{"deployment_id", "name", "app", "type", "provider", "spec", "spec_hash", "result", "secret_instance", "secret_refs", "state", "retain_until", "renew_after", "updated_at"}, resources},
		{"app_backups", []string{"deployment_id", "app", "since", "last_attempt_at", "last_build_id", "last_trigger", "last_success_at", "last_snapshot", "last_error", "failures", "last_drill_at", "last_good_drill_at"}, backups},
		{"audit_events", []string{"seq", "time", "actor", "issuer", "action", "deployment_id", "build_id", "subject", "request_id", "result", "reason", "count", "prev_hash", "hash"}, audits},
	} {
		if _, err := g.conn.CopyFrom(ctx, pgx.Identifier{t.table}, t.columns, pgx.CopyFromRows(t.rows)); err != nil {
			return "", fmt.Errorf("scalegen: copying %s: %w", t.table, err)
		}
	}
	return first, nil
}

// audit chains the next audit event.
func (g *gen) audit(at time.Time, actor, action, deployment, build string) []any {
	g.seq++
	e := store.AuditEvent{Seq: g.seq, Time: at, Actor: actor, Issuer: "session", Action: action, DeploymentID: deployment,
		BuildID: build, RequestID: "scalegen", Result: "ok", Count: 1, PrevHash: g.hash}
	e.Hash = audit.Hash(e)
	g.hash = e.Hash
	return []any{e.Seq, e.Time, e.Actor, e.Issuer, e.Action, e.DeploymentID, e.BuildID, e.Subject, e.RequestID, e.Result, e.Reason, e.Count, e.PrevHash, e.Hash}
}

// idAt is a UUIDv7 of time t, random otherwise.
func idAt(t time.Time) string {
	var u uuid.UUID
	rand.Read(u[:])
	ms := uint64(t.UnixMilli())
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u.String()
}
