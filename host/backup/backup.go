package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Database is a PostgreSQL database to dump or restore into, as the postgresql resource
// gives it (contract.PostgreSQLResult with the password revealed).
type Database struct {
	Host     string
	Port     int
	Database string
	User     string
	Password string
	// SSLMode is the libpq sslmode; empty leaves libpq's default.
	SSLMode string
}

// Snapshot is one backup.
type Snapshot struct {
	// ID is the restic id of the database snapshot, or of the files snapshot for a
	// backup of files alone; Restore takes it.
	ID   string
	Time time.Time
	// Tags are the tags given to Backup.
	Tags map[string]string
	// Database is the name of the dumped database, empty for a backup of files alone.
	Database string
	// FilesID is the restic id of the files snapshot and Files its paths; both are
	// empty for a backup of the database alone.
	FilesID string
	Files   []string
}

// ErrSnapshotNotFound is wrapped by the error of a Restore of an unknown snapshot.
var ErrSnapshotNotFound = errors.New("no such backup snapshot")

// Tags this package sets itself; Backup refuses them from callers.
const (
	tagPart      = "part"
	tagFiles     = "files-snapshot"
	partDatabase = "database"
	partFiles    = "files"
)

// timeFormat is how restic backup --time reads a time.
const timeFormat = "2006-01-02 15:04:05"

// Backup dumps db (when not nil) and the files (absolute paths, or relative to the
// working directory) into the repository of t, creating it if needed, and tags the
// snapshots with tags (deployment, app, kind). See the package documentation for the
// layout.
func Backup(ctx context.Context, t Target, db *Database, files []string, tags map[string]string) (Snapshot, error) {
	return backupAt(ctx, t, db, files, tags, time.Now())
}

// secrets are the secret values an operation knows, which no error may show.
func secrets(t Target, db *Database) []string {
	s := t.secrets()
	if db != nil {
		s = append(s, db.Password)
	}
	return s
}

// backupAt is Backup with the snapshots' time given, which tests set in the past.
func backupAt(ctx context.Context, t Target, db *Database, files []string, tags map[string]string, at time.Time) (Snapshot, error) {
	s, err := backupUnscrubbed(ctx, t, db, files, tags, at)
	return s, hide(err, secrets(t, db)...)
}

func backupUnscrubbed(ctx context.Context, t Target, db *Database, files []string, tags map[string]string, at time.Time) (Snapshot, error) {
	if db == nil && len(files) == 0 {
		return Snapshot{}, errors.New("backup: nothing to back up: give a database or files")
	}
	if db != nil {
		if err := db.validate(); err != nil {
			return Snapshot{}, err
		}
	}
	paths, err := absolutePaths(files)
	if err != nil {
		return Snapshot{}, err
	}
	tagFlags, err := tagArgs(tags)
	if err != nil {
		return Snapshot{}, err
	}
	r, err := openRepository(ctx, t, true)
	if err != nil {
		return Snapshot{}, err
	}
	at = at.UTC().Truncate(time.Second)
	// Both snapshots of a backup share its time, so that forget keeps or removes both.
	common := append([]string{"backup", "--json", "--host", hostname, "--time", at.Format(timeFormat)}, tagFlags...)
	s := Snapshot{Time: at, Tags: cloneTags(tags)}

	if len(paths) > 0 {
		args := append(slices.Clone(common), "--tag", tagPart+"="+partFiles, "--")
		id, err := r.backupFiles(ctx, append(args, paths...))
		if err != nil {
			return Snapshot{}, err
		}
		s.FilesID, s.Files = id, paths
		if db == nil {
			ids, err := r.fullIDs(ctx, id)
			if err != nil {
				return Snapshot{}, err
			}
			s.ID, s.FilesID = ids[0], ids[0]
			return s, nil
		}
	}

	args := append(slices.Clone(common), "--tag", tagPart+"="+partDatabase)
	if s.FilesID != "" {
		args = append(args, "--tag", tagFiles+"="+s.FilesID)
	}
	args = append(args, "--stdin", "--stdin-filename", db.Database+".dump")
	var id string
	err = retryLocked(ctx, func() error {
		var err error
		id, err = r.backupDatabase(ctx, db, args)
		return err
	})
	if err != nil {
		if s.FilesID != "" {
			r.removeSnapshot(ctx, s.FilesID)
		}
		return Snapshot{}, err
	}
	s.Database = db.Database
	if s.FilesID == "" {
		ids, err := r.fullIDs(ctx, id)
		if err != nil {
			return Snapshot{}, err
		}
		s.ID = ids[0]
		return s, nil
	}
	ids, err := r.fullIDs(ctx, id, s.FilesID)
	if err != nil {
		return Snapshot{}, err
	}
	s.ID, s.FilesID = ids[0], ids[1]
	return s, nil
}

// Snapshots lists the backups in the repository of t, oldest first; none when nothing
// was backed up there yet.
func Snapshots(ctx context.Context, t Target) ([]Snapshot, error) {
	r, err := openRepository(ctx, t, false)
	if err != nil {
		return nil, hide(err, t.secrets()...)
	}
	list, err := r.snapshots(ctx)
	if errors.Is(err, ErrNoRepository) {
		return nil, nil
	}
	if err != nil {
		return nil, hide(err, t.secrets()...)
	}
	return backups(list), nil
}

// Restore brings back the backup snapshotID (its id or a unique prefix): the dump into
// db with pg_restore --clean --if-exists --no-owner in a single transaction, so a failed
// restore changes nothing, then the files under filesTarget, each at its original
// absolute path below it. db must be given when the backup has a database, filesTarget
// when it has files.
func Restore(ctx context.Context, t Target, snapshotID string, db *Database, filesTarget string) error {
	return hide(restore(ctx, t, snapshotID, db, filesTarget), secrets(t, db)...)
}

func restore(ctx context.Context, t Target, snapshotID string, db *Database, filesTarget string) error {
	if snapshotID == "" {
		return errors.New("restore: no snapshot id given: choose one from Snapshots")
	}
	r, err := openRepository(ctx, t, false)
	if err != nil {
		return err
	}
	list, err := r.snapshots(ctx)
	if err != nil {
		return err
	}
	s, err := find(backups(list), snapshotID, r.url)
	if err != nil {
		return err
	}
	switch {
	case s.Database != "" && db == nil:
		return fmt.Errorf("restoring snapshot %s: it holds database %s: give the database to restore it into", s.ID, s.Database)
	case s.Database == "" && db != nil:
		return fmt.Errorf("restoring snapshot %s: it holds no database, only files", s.ID)
	case s.FilesID != "" && filesTarget == "":
		return fmt.Errorf("restoring snapshot %s: it holds files: give the directory to restore them under", s.ID)
	}
	if db != nil {
		if err := db.validate(); err != nil {
			return err
		}
		if err := retryLocked(ctx, func() error { return r.restoreDatabase(ctx, s, db) }); err != nil {
			return err
		}
	}
	if s.FilesID != "" {
		if _, err := r.run(ctx, "restoring files of snapshot "+s.ID+" from", nil, "restore", s.FilesID, "--target", filesTarget); err != nil {
			return err
		}
	}
	return nil
}

// Forget removes the backups older than keepWithin before the newest one, and the data
// only they use (restic forget --keep-within --prune). Counting from the newest backup
// rather than now means that a deployment whose backups stopped keeps its last ones.
func Forget(ctx context.Context, t Target, keepWithin time.Duration) error {
	return hide(forget(ctx, t, keepWithin), t.secrets()...)
}

func forget(ctx context.Context, t Target, keepWithin time.Duration) error {
	if keepWithin < time.Hour {
		return fmt.Errorf("forget: keep-within %v is shorter than restic's unit, an hour", keepWithin)
	}
	r, err := openRepository(ctx, t, false)
	if err != nil {
		return err
	}
	hours := int64((keepWithin + time.Hour - 1) / time.Hour)
	// No grouping: the database and files snapshots of a backup go together.
	_, err = r.run(ctx, "forgetting old snapshots in", nil,
		"forget", "--keep-within", strconv.FormatInt(hours, 10)+"h", "--group-by", "", "--prune")
	if errors.Is(err, ErrNoRepository) {
		return nil
	}
	return err
}

func (db *Database) validate() error {
	var missing []string
	if db.Host == "" {
		missing = append(missing, "host")
	}
	if db.Port <= 0 {
		missing = append(missing, "port")
	}
	if db.Database == "" {
		missing = append(missing, "database name")
	}
	if db.User == "" {
		missing = append(missing, "user")
	}
	if len(missing) > 0 {
		return fmt.Errorf("backup database %q has no %s", db.Database, strings.Join(missing, ", "))
	}
	if strings.ContainsAny(db.Database, "/\x00") {
		return fmt.Errorf("backup database %q: a name with a slash cannot name its dump file", db.Database)
	}
	return nil
}

// command makes a libpq child (pg_dump, pg_restore) with the whole connection in its
// environment: the password stays off the command line, and a database name is never
// read as a connection string.
func (db *Database) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	env := childEnv(
		"PGHOST="+db.Host,
		"PGPORT="+strconv.Itoa(db.Port),
		"PGDATABASE="+db.Database,
		"PGUSER="+db.User,
		"PGPASSWORD="+db.Password,
		"PGAPPNAME=fedhost-backup",
		"PGCONNECT_TIMEOUT=30",
	)
	if db.SSLMode != "" {
		env = append(env, "PGSSLMODE="+db.SSLMode)
	}
	return command(ctx, bin, append([]string{"--no-password"}, args...), env)
}

// backupFiles runs restic backup of paths and returns the new snapshot's short id.
func (r *repository) backupFiles(ctx context.Context, args []string) (string, error) {
	out, err := r.run(ctx, "backing up files into", nil, args...)
	if err != nil {
		// restic exits 3 after storing a snapshot without the files it could not read.
		if short := snapshotID(out); short != "" {
			r.removeSnapshot(ctx, short)
		}
		return "", err
	}
	return shortID(out)
}

// backupDatabase runs pg_dump | restic backup --stdin and returns the new snapshot's
// short id.
func (r *repository) backupDatabase(ctx context.Context, db *Database, args []string) (string, error) {
	dumpBin, err := pgDumpTool.path()
	if err != nil {
		return "", err
	}
	// Uncompressed, so that restic finds the unchanged parts of yesterday's dump; restic
	// compresses what it stores.
	dump := db.command(ctx, dumpBin, "--format=custom", "--compress=0")
	dumpStderr := &stderrTail{}
	dump.Stderr = dumpStderr

	storeCtx, stopStore := context.WithCancel(ctx)
	defer stopStore()
	store := r.command(storeCtx, args...)
	var storeOut bytes.Buffer
	storeStderr := &stderrTail{}
	store.Stdout, store.Stderr = &storeOut, storeStderr

	dumpErr, storeErr := pipe(dump, store, stopStore)
	secrets := []string{db.Password}
	what := "backing up database " + db.Database + " into"
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s restic repository %s: %w", what, r.url, ctx.Err())
	case dumpErr != nil && (storeErr == nil || !(dumpStderr.contains("could not write") || brokenPipe(dumpErr))):
		// pg_dump failed on its own. restic read a short stream and may have stored it.
		if short := snapshotID(storeOut.Bytes()); short != "" {
			r.removeSnapshot(ctx, short)
		}
		return "", fmt.Errorf("%s restic repository %s: %w", what, r.url,
			childError("pg_dump", dumpErr, dumpStderr, append(r.t.secrets(), secrets...)))
	case storeErr != nil:
		return "", r.error(ctx, what, storeErr, storeStderr, secrets)
	}
	return shortID(storeOut.Bytes())
}

// restoreDatabase runs restic dump | pg_restore.
func (r *repository) restoreDatabase(ctx context.Context, s Snapshot, db *Database) error {
	restoreBin, err := pgRestoreTool.path()
	if err != nil {
		return err
	}
	dump := r.command(ctx, "dump", s.ID, "/"+s.Database+".dump")
	dumpStderr := &stderrTail{}
	dump.Stderr = dumpStderr

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	load := db.command(loadCtx, restoreBin, "--clean", "--if-exists", "--no-owner", "--single-transaction",
		"--dbname", "dbname="+quoteConninfo(db.Database))
	loadStderr := &stderrTail{}
	load.Stderr = loadStderr

	dumpErr, loadErr := pipe(dump, load, stopLoad)
	secrets := append(r.t.secrets(), db.Password)
	what := fmt.Sprintf("restoring database %s from snapshot %s of", db.Database, s.ID)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s restic repository %s: %w", what, r.url, ctx.Err())
	case dumpErr != nil && (loadErr == nil || !dumpStderr.contains("broken pipe")):
		// restic failed on its own; pg_restore was stopped, or rolled back the short stream.
		return r.error(ctx, what, dumpErr, dumpStderr, []string{db.Password})
	case loadErr != nil:
		return fmt.Errorf("%s restic repository %s: %w", what, r.url, childError("pg_restore", loadErr, loadStderr, secrets))
	}
	return nil
}

// brokenPipe reports whether a child ended on SIGPIPE: its reader went away first.
func brokenPipe(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE
}

// pipe runs producer | consumer, with no copy of the stream in this process or on disk.
// When the producer fails, the consumer is stopped, so that it does not take a
// truncated stream for a whole one.
func pipe(producer, consumer *exec.Cmd, stopConsumer context.CancelFunc) (producerErr, consumerErr error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err, nil
	}
	producer.Stdout, consumer.Stdin = pw, pr
	if err := consumer.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	if err := producer.Start(); err != nil {
		pr.Close()
		pw.Close()
		stopConsumer()
		consumer.Wait()
		return err, nil
	}
	// The children hold their ends; ours would keep the stream open.
	pr.Close()
	pw.Close()
	producerErr = producer.Wait()
	if producerErr != nil {
		stopConsumer()
	}
	return producerErr, consumer.Wait()
}

// removeSnapshot removes a snapshot a failed backup left, on a best-effort basis: the
// next Forget prunes its data either way.
func (r *repository) removeSnapshot(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	r.run(ctx, "removing a partial snapshot from", nil, "forget", id)
}

// backups turns restic snapshots into backups: a database snapshot with its files
// snapshot, or a files snapshot alone. Snapshots this package did not make are left out.
func backups(list []resticSnapshot) []Snapshot {
	// The files-snapshot tag holds the short id restic backup prints.
	byShortID := make(map[string]resticSnapshot, len(list))
	withDatabase := make(map[string]bool)
	for _, s := range list {
		byShortID[s.ShortID] = s
		if id := parseTags(s.Tags)[tagFiles]; id != "" {
			withDatabase[id] = true
		}
	}
	var out []Snapshot
	for _, s := range list {
		tags := parseTags(s.Tags)
		part, filesID := tags[tagPart], tags[tagFiles]
		delete(tags, tagPart)
		delete(tags, tagFiles)
		b := Snapshot{ID: s.ID, Time: s.Time, Tags: tags}
		switch {
		case part == partDatabase && len(s.Paths) == 1:
			b.Database = strings.TrimSuffix(strings.TrimPrefix(s.Paths[0], "/"), ".dump")
			if files, ok := byShortID[filesID]; ok {
				b.FilesID, b.Files = files.ID, files.Paths
			}
		case part == partFiles && !withDatabase[s.ShortID]:
			b.FilesID, b.Files = s.ID, s.Paths
		default:
			continue
		}
		out = append(out, b)
	}
	slices.SortStableFunc(out, func(a, b Snapshot) int { return a.Time.Compare(b.Time) })
	return out
}

// find returns the backup whose id is id or starts with it.
func find(list []Snapshot, id, url string) (Snapshot, error) {
	var found []Snapshot
	for _, s := range list {
		if strings.HasPrefix(s.ID, id) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Snapshot{}, fmt.Errorf("restoring snapshot %s of restic repository %s: %w: choose one from Snapshots", id, url, ErrSnapshotNotFound)
	default:
		return Snapshot{}, fmt.Errorf("restoring snapshot %s of restic repository %s: %d backups have ids starting so: give more of the id", id, url, len(found))
	}
}

// tagArgs turns tags into restic --tag flags, key=value, sorted.
func tagArgs(tags map[string]string) ([]string, error) {
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		switch {
		case k == "" || strings.ContainsAny(k, "=,"):
			return nil, fmt.Errorf("backup tag %q: a key is not empty and has no '=' or ','", k)
		case strings.Contains(v, ","):
			return nil, fmt.Errorf("backup tag %s=%q: restic splits tags at ',', so a value cannot have one", k, v)
		case k == tagPart || k == tagFiles:
			return nil, fmt.Errorf("backup tag %s is set by the backup itself", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var args []string
	for _, k := range keys {
		args = append(args, "--tag", k+"="+tags[k])
	}
	return args, nil
}

func parseTags(tags []string) map[string]string {
	m := make(map[string]string, len(tags))
	for _, tag := range tags {
		k, v, _ := strings.Cut(tag, "=")
		m[k] = v
	}
	return m
}

func cloneTags(tags map[string]string) map[string]string {
	m := make(map[string]string, len(tags))
	for k, v := range tags {
		m[k] = v
	}
	return m
}

// absolutePaths makes paths absolute and checks that they exist, since restic stores a
// snapshot without the paths it cannot read.
func absolutePaths(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("backing up %s: %w", p, err)
		}
		if _, err := os.Lstat(abs); err != nil {
			return nil, fmt.Errorf("backing up files: %w", err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// quoteConninfo quotes a value for a libpq connection string.
func quoteConninfo(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
