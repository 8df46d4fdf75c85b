package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/backup"
	"github.com/fedhost/fedhost/host/migration"
)

type exportAnswer struct {
	ID        string    `json:"id"`
	Build     string    `json:"build"`
	ExpiresAt time.Time `json:"expires_at"`
	Migration string    `json:"migration"`
}

// A Miniflux deployment is exported: a final snapshot fails first (the bucket
// unreachable) and leaves Miniflux running and nothing exported; then the export gives a
// string the target's keys open, whose read-only key lists the snapshot and cannot
// write; a second export is refused; the confirmation revokes the key; resume refuses
// after the move; and no secret of the string is in a log, build event, audit event or
// the store's file.
func TestExportGivesAStringTheTargetOpensAndConfirmRevokes(t *testing.T) {
	realRestic, err := exec.LookPath("restic")
	require.NoError(t, err)
	wrapper := t.TempDir()
	outage := filepath.Join(wrapper, "outage")
	script := "#!/bin/sh\nif [ -e " + outage + " ]; then echo 'Fatal: unable to open repository: simulated outage' >&2; exit 1; fi\nexec " + realRestic + " \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(wrapper, "restic"), []byte(script), 0o755))
	h := startHost(t, "PATH="+wrapper+":"+os.Getenv("PATH"))
	d := h.create("move")
	require.Equal(t, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("move.example.org", nil)).ID).State)
	addr := h.deployment(d.ID).Nodes["miniflux-web"]["http"]
	password := h.nodeFile("move", "miniflux-web", "admin-password")
	code, body := minifluxAPI(t, addr, "admin", password, "POST", "/v1/categories", map[string]string{"title": "Moving house"})
	require.Equal(t, http.StatusCreated, code, "%s", body)

	keys, err := migration.LoadKeys(t.TempDir())
	require.NoError(t, err)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/migration/recipient" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"recipient": keys.Recipient()})
	}))
	defer target.Close()

	// The final snapshot fails: Miniflux runs again, nothing is exported.
	require.NoError(t, os.WriteFile(outage, nil, 0o600))
	var refused apiError
	require.Equal(t, http.StatusConflict, h.call("POST", "/deployments/"+d.ID+"/export", map[string]string{"target": target.URL}, &refused))
	require.Contains(t, refused.Error.Message, "final backup of miniflux", "the error names the step and the app")
	require.NoError(t, os.Remove(outage))
	after := h.deployment(d.ID)
	require.NotEqual(t, "exported", after.State)
	require.Contains(t, categories(t, after.Nodes["miniflux-web"]["http"], password), "Moving house", "Miniflux runs again")

	// The export.
	started := time.Now()
	var x exportAnswer
	require.Equal(t, http.StatusOK, h.call("POST", "/deployments/"+d.ID+"/export", map[string]string{"target": target.URL + "/"}, &x))
	t.Logf("export took %s", time.Since(started))
	require.True(t, strings.HasPrefix(x.Migration, migration.Prefix))
	p, err := keys.Open(x.Migration, time.Now())
	require.NoError(t, err)
	require.Equal(t, x.ID, p.ID)
	require.Equal(t, "move.example.org", p.Domain.Name)
	require.Contains(t, p.Versions, "miniflux")
	app, ok := p.Apps["miniflux"]
	require.True(t, ok, "the payload has Miniflux's snapshot")
	require.NotEmpty(t, p.Source.ConfirmToken)
	require.Equal(t, "exported", h.deployment(d.ID).State)
	var done build
	require.Equal(t, http.StatusOK, h.call("GET", "/builds/"+x.Build, nil, &done))
	require.Equal(t, "succeeded", done.State)

	// The read-only key lists the snapshot with restic, and cannot write.
	ro := backup.Target{Endpoint: app.S3.Endpoint, Region: app.S3.Region, PathStyle: app.S3.PathStyle, Bucket: app.S3.Bucket, Path: app.S3.Path,
		AccessKeyID: app.S3.AccessKeyID, SecretAccessKey: app.S3.SecretAccessKey, RepositoryPassword: app.RepositoryPassword}
	ctx := context.Background()
	snaps, err := backup.Snapshots(ctx, ro)
	require.NoError(t, err)
	var ids []string
	for _, s := range snaps {
		ids = append(ids, s.ID)
	}
	require.Contains(t, ids, app.Snapshot)
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(app.S3.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: app.S3.AccessKeyID, SecretAccessKey: app.S3.SecretAccessKey}, nil
		})})
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(app.S3.Bucket), Key: aws.String("miniflux/intruder"), Body: strings.NewReader("x")})
	require.Error(t, err, "the export's key only reads")

	// A second export is refused.
	require.Equal(t, http.StatusConflict, h.call("POST", "/deployments/"+d.ID+"/export", map[string]string{"recipient": keys.Recipient()}, &refused))

	// A wrong token is not found and says no more; the right one revokes the key.
	require.Equal(t, http.StatusNotFound, h.call("POST", "/migration/confirm", map[string]string{"id": x.ID, "token": "wrong"}, &refused))
	require.Equal(t, "no such export", refused.Error.Message)
	var confirmed struct{ ID, State string }
	require.Equal(t, http.StatusOK, h.call("POST", "/migration/confirm", map[string]string{"id": x.ID, "token": p.Source.ConfirmToken}, &confirmed))
	require.Equal(t, "confirmed", confirmed.State)
	_, err = backup.Snapshots(ctx, ro)
	require.Error(t, err, "the revoked key reads nothing")

	// After the move, resume refuses and says why.
	require.Equal(t, http.StatusConflict, h.call("POST", "/deployments/"+d.ID+"/resume", nil, &refused))
	require.Contains(t, refused.Error.Message, "moved to another fedhost")

	// No secret of the string anywhere it could leak.
	secrets := map[string]string{"string": x.Migration, "read-only key": app.S3.SecretAccessKey, "repository password": app.RepositoryPassword,
		"confirmation token": p.Source.ConfirmToken}
	var events []json.RawMessage
	require.Equal(t, http.StatusOK, h.call("GET", "/audit-events?limit=1000", nil, &events))
	var b struct{ Events []json.RawMessage }
	require.Equal(t, http.StatusOK, h.call("GET", "/builds/"+x.Build, nil, &b))
	places := map[string][]byte{"the host's log": []byte(h.log.String())}
	for i, e := range events {
		places["audit event "+itoa(i)] = e
	}
	for i, e := range b.Events {
		places["build event "+itoa(i)] = e
	}
	stores, err := filepath.Glob(filepath.Join(h.dataDir, "*.db*"))
	require.NoError(t, err)
	require.NotEmpty(t, stores, "the store's file")
	for _, f := range stores {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		places[f] = raw
	}
	for where, text := range places {
		for what, s := range secrets {
			require.False(t, bytes.Contains(text, []byte(s)), "the %s is in %s", what, where)
		}
	}
}

// BenchmarkExport times an export of a Miniflux deployment, step by step, from the
// export build's events: the nodes stopped, the final backup, the read-only key, and the
// rest (queueing, recording, sealing the string). Each iteration resumes the deployment
// first (which revokes the keys), outside the timer.
func BenchmarkExport(b *testing.B) {
	h := startHost(b)
	d := h.create("bexp")
	require.Equal(b, "succeeded", h.wait(h.submit(d.ID, minifluxConfig("bexp.example.org", nil)).ID).State)
	keys, err := migration.LoadKeys(b.TempDir())
	require.NoError(b, err)
	var totals, stops, backups, mints, rests []time.Duration
	for i := 0; i < b.N; i++ {
		if i > 0 {
			b.StopTimer()
			var r build
			require.Equal(b, http.StatusAccepted, h.call("POST", "/deployments/"+d.ID+"/resume", nil, &r))
			require.Equal(b, "succeeded", h.wait(r.ID).State)
			b.StartTimer()
		}
		start := time.Now()
		var x exportAnswer
		require.Equal(b, http.StatusOK, h.call("POST", "/deployments/"+d.ID+"/export", map[string]string{"recipient": keys.Recipient()}, &x))
		total := time.Since(start)
		var done build
		require.Equal(b, http.StatusOK, h.call("GET", "/builds/"+x.Build, nil, &done))
		var first, stopped, backedUp, minted time.Time
		for _, e := range done.Events {
			if first.IsZero() {
				first = e.Time
			}
			switch {
			case strings.HasPrefix(e.Message, "the nodes are stopped"):
				stopped = e.Time
			case strings.HasPrefix(e.Message, "final backup "):
				backedUp = e.Time
			case strings.HasPrefix(e.Message, "read-only key to the backups"):
				minted = e.Time
			}
		}
		require.False(b, stopped.IsZero() || backedUp.IsZero() || minted.IsZero(), "events: %+v", done.Events)
		totals = append(totals, total)
		stops = append(stops, stopped.Sub(first))
		backups = append(backups, backedUp.Sub(stopped))
		mints = append(mints, minted.Sub(backedUp))
		rests = append(rests, total-minted.Sub(first))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(totals)), "total-ms")
	b.ReportMetric(ms(median(stops)), "stop-ms")
	b.ReportMetric(ms(median(backups)), "backup-ms")
	b.ReportMetric(ms(median(mints)), "key-ms")
	b.ReportMetric(ms(median(rests)), "queue+record+seal-ms")
}
