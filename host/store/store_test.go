package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/internal/pgtest"
	"github.com/fedhost/fedhost/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func drivers(t *testing.T, test func(t *testing.T, cfg store.Config)) { storetest.Drivers(t, test) }

func open(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	return storetest.Open(t, cfg)
}

func TestOpenMigratesAndReopens(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st, err := store.Open(ctx, cfg)
		require.NoError(t, err)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme", Name: "Acme", Config: "{}"})
		require.NoError(t, err)
		require.NoError(t, st.Close())

		// Opening a migrated database again changes nothing and keeps the data.
		st = open(t, cfg)
		_, err = st.CreateBuild(ctx, d.ID)
		require.NoError(t, err)
		requireSchemaVersion(t, cfg, store.SchemaVersion())
	})
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st, err := store.Open(ctx, cfg)
		require.NoError(t, err)
		require.NoError(t, st.Close())

		newer := store.SchemaVersion() + 4
		execRaw(t, cfg, fmt.Sprintf("INSERT INTO schema_version (version, applied_at) VALUES (%d, CURRENT_TIMESTAMP)", newer))

		_, err = store.Open(ctx, cfg)
		var tooNew *store.TooNewError
		require.ErrorAs(t, err, &tooNew)
		require.ErrorContains(t, err, fmt.Sprintf("database schema version %d is newer than this fedhost knows (version %d)", newer, store.SchemaVersion()))
	})
}

func TestOpenRefusesUnknownDatabase(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), store.Config{Database: "mysql://admin:hunter2@db/fedhost", DataDir: t.TempDir()})
	require.EqualError(t, err, `database: unsupported value "mysql://admin:xxxxx@db/fedhost": use "sqlite" or a postgres:// DSN`)

	_, err = store.Open(context.Background(), store.Config{Database: "sqlite"})
	require.ErrorContains(t, err, "data_dir")
}

func TestDeploymentsBuildsAndEvents(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)

		d, err := st.CreateDeployment(ctx, store.Deployment{
			Namespace: "acme", Name: "Acme", Owner: "alice", Domain: "acme.example",
			State: "active", CatalogRevision: "r1", Config: `{"apps":{}}`,
		})
		require.NoError(t, err)
		require.NotEmpty(t, d.ID)
		require.False(t, d.CreatedAt.IsZero())

		_, err = st.CreateDeployment(ctx, store.Deployment{Namespace: "acme"})
		require.ErrorIs(t, err, store.ErrConflict)
		_, err = st.CreateDeployment(ctx, store.Deployment{Namespace: "Not_DNS"})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.NotContains(t, err.Error(), "Not_DNS", "the error does not echo the namespace")

		_, err = st.CreateBuild(ctx, "no-such-deployment")
		require.ErrorIs(t, err, store.ErrNotFound)

		b, err := st.CreateBuild(ctx, d.ID)
		require.NoError(t, err)
		got, err := st.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, b, got)
		require.Equal(t, store.BuildQueued, got.State)
		require.Nil(t, got.StartedAt)

		require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildRunning, ""))
		got, err = st.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, store.BuildRunning, got.State)
		require.NotNil(t, got.StartedAt)
		require.Nil(t, got.FinishedAt)

		first, err := st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: b.ID, Step: "provision", Level: store.LevelInfo, Message: "database ready", Progress: 40})
		require.NoError(t, err)
		second, err := st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: b.ID, Step: "render", Level: store.LevelWarn, Message: "slow", Progress: 80})
		require.NoError(t, err)
		require.Equal(t, 1, first.Seq)
		require.Equal(t, 2, second.Seq)
		_, err = st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: "no-such-build", Message: "lost"})
		require.ErrorIs(t, err, store.ErrNotFound)

		events, err := st.BuildEvents(ctx, b.ID)
		require.NoError(t, err)
		require.Len(t, events, 2)
		for i, want := range []store.BuildEvent{first, second} {
			require.True(t, want.Time.Equal(events[i].Time), "event %d time", i)
			events[i].Time = want.Time
			require.Equal(t, want, events[i])
		}

		require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildFailed, "postgresql: quota exceeded"))
		got, err = st.GetBuild(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, store.BuildFailed, got.State)
		require.Equal(t, "postgresql: quota exceeded", got.Reason)
		require.NotNil(t, got.FinishedAt)
		require.False(t, got.FinishedAt.Before(*got.StartedAt))

		// A final state is final.
		err = st.SetBuildState(ctx, b.ID, store.BuildRunning, "")
		require.ErrorIs(t, err, store.ErrBuildFinished)
		_, err = st.GetBuild(ctx, "no-such-build")
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorIs(t, st.SetBuildState(ctx, "no-such-build", store.BuildRunning, ""), store.ErrNotFound)
	})
}

// A deployment's domain is its claim: another deployment cannot submit it, a domain under
// it or above it, until the first is destroyed; its own resubmit is no conflict.
func TestDomainClaims(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		submit := func(id, domain string) error {
			b, err := st.SubmitBuild(ctx, id, store.OperationDeploy, store.Submission{Config: `{}`, SecretRefs: `{}`, Domain: domain})
			if err == nil {
				require.NoError(t, st.SetBuildState(ctx, b.ID, store.BuildSucceeded, ""))
			}
			return err
		}
		a, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "claim-a", State: "active", Config: `{}`})
		require.NoError(t, err)
		b, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "claim-b", State: "active", Config: `{}`})
		require.NoError(t, err)
		require.NoError(t, submit(a.ID, "acme.test"))
		require.NoError(t, submit(a.ID, "acme.test"), "a deployment's own domain is no conflict")
		for _, domain := range []string{"acme.test", "x.acme.test", "deep.x.acme.test", "test"} {
			require.ErrorIs(t, submit(b.ID, domain), store.ErrDomainTaken, domain)
		}
		got, err := st.GetDeployment(ctx, b.ID)
		require.NoError(t, err)
		require.Empty(t, got.Domain, "a refused submit stores nothing")
		require.NoError(t, submit(b.ID, "xacme.test"), "a name that only ends the same is another domain")
		require.ErrorIs(t, submit(a.ID, "xacme.test"), store.ErrDomainTaken)

		require.NoError(t, st.UpdateDeployment(ctx, a.ID, map[string]any{"state": "destroyed"}))
		require.NoError(t, submit(b.ID, "acme.test"), "a destroy releases the domain")
	})
}

func TestAppendBuildEventConcurrently(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: "acme"})
		require.NoError(t, err)
		b, err := st.CreateBuild(ctx, d.ID)
		require.NoError(t, err)

		const n = 20
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: b.ID, Message: fmt.Sprint(i)})
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		events, err := st.BuildEvents(ctx, b.ID)
		require.NoError(t, err)
		require.Len(t, events, n)
		for i, e := range events {
			require.Equal(t, i+1, e.Seq)
		}
	})
}

// execRaw runs a statement on the database behind cfg, outside the store.
func execRaw(t *testing.T, cfg store.Config, statement string) {
	t.Helper()
	db := rawDB(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, statement)
	require.NoError(t, err)
}

func requireSchemaVersion(t *testing.T, cfg store.Config, want int) {
	t.Helper()
	var got, rows int
	require.NoError(t, rawDB(t, cfg).QueryRow("SELECT MAX(version), COUNT(*) FROM schema_version").Scan(&got, &rows))
	require.Equal(t, want, got)
	require.Equal(t, want, rows, "one row per applied migration")
}

func rawDB(t *testing.T, cfg store.Config) *sql.DB { return storetest.RawDB(t, cfg) }

// UserNames answers the names of the IDs asked, leaves an unknown ID out, and answers
// more IDs than one IN list holds.
func TestUserNames(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		var ids []string
		want := map[string]string{}
		for i := range 600 {
			u, err := st.CreateUser(ctx, store.User{Name: fmt.Sprintf("user-%03d", i), PasswordHash: "x"})
			require.NoError(t, err)
			if i%2 == 0 {
				ids = append(ids, u.ID)
				want[u.ID] = u.Name
			}
		}
		ids = append(ids, "no-such-user")
		got, err := st.UserNames(ctx, ids)
		require.NoError(t, err)
		require.Equal(t, want, got)
		got, err = st.UserNames(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, got)
	})
}

// ListBuildsBefore pages through every build, newest first, without configurations.
func TestListBuildsBeforePages(t *testing.T) {
	t.Parallel()
	drivers(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		st := open(t, cfg)
		var want []string
		for i := range 5 {
			d, err := st.CreateDeployment(ctx, store.Deployment{Namespace: fmt.Sprintf("pages-%d", i), Config: "{}"})
			require.NoError(t, err)
			b, err := st.SubmitBuild(ctx, d.ID, store.OperationDeploy, store.Submission{Config: `{"big":"config"}`, SecretRefs: "{}"})
			require.NoError(t, err)
			want = append([]string{b.ID}, want...)
		}
		var got []string
		before := ""
		for range 4 {
			page, err := st.ListBuildsBefore(ctx, before, 2)
			require.NoError(t, err)
			for _, b := range page {
				require.Empty(t, b.Config, "a list of jobs reads no configuration")
				got = append(got, b.ID)
			}
			if len(page) < 2 {
				break
			}
			before = page[len(page)-1].ID
		}
		require.Equal(t, want, got)
	})
}
