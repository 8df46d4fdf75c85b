package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Target is a restic repository in an S3 bucket: s3:<Endpoint>/<Bucket>/<Path>.
type Target struct {
	// Endpoint is the S3 endpoint with its scheme, http://127.0.0.1:7070 say.
	Endpoint string
	Region   string
	// PathStyle addresses the bucket as Endpoint/Bucket (contract.S3Result.PathStyle).
	PathStyle       bool
	Bucket          string
	AccessKeyID     string
	SecretAccessKey string
	// RepositoryPassword encrypts the repository; without it the backups are lost.
	RepositoryPassword string
	// Path is the prefix of the repository in the bucket, the app name say.
	Path string
	// NoLock runs restic without locking the repository (--no-lock), which a key that
	// may only read the bucket needs: an import restores from the source's repository
	// with the read-only key of a migration string. Only reads work so.
	NoLock bool
}

// ErrRepositoryPassword is wrapped by the error of an operation on a repository that
// the target's password does not open.
var ErrRepositoryPassword = errors.New("the repository password does not open the restic repository: use the password it was created with (the backup secret of the deployment)")

// ErrNoRepository is wrapped by the error of a read from a target with no repository.
var ErrNoRepository = errors.New("no restic repository at the target: nothing was backed up there yet")

// ErrLocked is wrapped by the error of an operation that found the repository locked by
// another restic (a backup, forget or restore of the same app) for longer than
// lockWait.
var ErrLocked = errors.New("another restic operation holds the repository's lock")

// lockWait is how long an operation waits for another one's lock to go. Debian 12's
// restic (0.14) has no --retry-lock, so the package retries itself.
var lockWait = 2 * time.Minute

// retryLocked runs f again, with a growing pause, for as long as it fails with ErrLocked
// and lockWait allows.
func retryLocked(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(lockWait)
	pause := 500 * time.Millisecond
	for {
		err := f()
		if !errors.Is(err, ErrLocked) || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(pause*2, 8*time.Second)
	}
}

// repository runs restic on one target.
type repository struct {
	t   Target
	url string
	bin string
}

// hostname is recorded in every snapshot in place of the machine's name, so that
// snapshots taken by any host of a cluster form one group for forget.
const hostname = "fedhost"

func (t Target) url() string {
	u := "s3:" + strings.TrimRight(t.Endpoint, "/") + "/" + t.Bucket
	if p := strings.Trim(t.Path, "/"); p != "" {
		u += "/" + p
	}
	return u
}

func (t Target) validate() error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"endpoint", t.Endpoint}, {"bucket", t.Bucket}, {"access key id", t.AccessKeyID},
		{"secret access key", t.SecretAccessKey}, {"repository password", t.RepositoryPassword},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("backup target %s has no %s", t.url(), strings.Join(missing, ", "))
	}
	return nil
}

func (t Target) secrets() []string { return []string{t.SecretAccessKey, t.RepositoryPassword} }

// openRepository checks the target and finds restic; with create, it opens the
// repository first and initializes it if there is none. Without, the first command
// finds out: each restic run costs a key derivation, most of its time.
func openRepository(ctx context.Context, t Target, create bool) (*repository, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	bin, err := resticTool.path()
	if err != nil {
		return nil, err
	}
	r := &repository{t: t, url: t.url(), bin: bin}
	if !create {
		return r, nil
	}
	_, err = r.run(ctx, "opening", nil, "cat", "config")
	if err == nil || !errors.Is(err, ErrNoRepository) {
		return r, err
	}
	if _, err := r.run(ctx, "initializing", nil, "init"); err != nil {
		// Another host may have initialized it meanwhile.
		if _, again := r.run(ctx, "opening", nil, "cat", "config"); again == nil {
			return r, nil
		}
		return nil, err
	}
	return r, nil
}

// command makes a restic child with the repository, its options and the secrets in
// the environment.
func (r *repository) command(ctx context.Context, args ...string) *exec.Cmd {
	full := []string{"--repo", r.url}
	if r.t.NoLock {
		full = append(full, "--no-lock")
	}
	if r.t.PathStyle {
		full = append(full, "-o", "s3.bucket-lookup=path")
	}
	if r.t.Region != "" {
		full = append(full, "-o", "s3.region="+r.t.Region)
	}
	env := childEnv(
		"AWS_ACCESS_KEY_ID="+r.t.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+r.t.SecretAccessKey,
		"RESTIC_PASSWORD="+r.t.RepositoryPassword,
		// restic reads --time in local time.
		"TZ=UTC",
	)
	return command(ctx, r.bin, append(full, args...), env)
}

// run runs restic with args and returns its stdout, also when it fails. A repository
// locked by another operation is waited for (retryLocked).
func (r *repository) run(ctx context.Context, what string, extraSecrets []string, args ...string) ([]byte, error) {
	var out []byte
	err := retryLocked(ctx, func() error {
		cmd := r.command(ctx, args...)
		var stdout bytes.Buffer
		stderr := &stderrTail{}
		cmd.Stdout, cmd.Stderr = &stdout, stderr
		err := cmd.Run()
		out = stdout.Bytes()
		if err != nil {
			return r.error(ctx, what, err, stderr, extraSecrets)
		}
		return nil
	})
	return out, err
}

// error describes a failed restic child, naming the known causes.
func (r *repository) error(ctx context.Context, what string, err error, stderr *stderrTail, extraSecrets []string) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s restic repository %s: %w", what, r.url, ctx.Err())
	}
	switch {
	case stderr.contains("wrong password or no key found"):
		return fmt.Errorf("%s restic repository %s: %w", what, r.url, ErrRepositoryPassword)
	case stderr.contains("unable to open config file") && stderr.contains("The specified key does not exist"):
		return fmt.Errorf("%s restic repository %s: %w", what, r.url, ErrNoRepository)
	case stderr.contains("repository is already locked"):
		return fmt.Errorf("%s restic repository %s: %w: try again when it is done", what, r.url, ErrLocked)
	case stderr.contains("Access Denied"):
		return fmt.Errorf("%s restic repository %s: the S3 endpoint refuses access key %s: check the key and its grant on bucket %s", what, r.url, r.t.AccessKeyID, r.t.Bucket)
	}
	return fmt.Errorf("%s restic repository %s: %w", what, r.url,
		childError("restic", err, stderr, append(r.t.secrets(), extraSecrets...)))
}

// resticSnapshot is an element of `restic snapshots --json`.
type resticSnapshot struct {
	ID      string    `json:"id"`
	ShortID string    `json:"short_id"`
	Time    time.Time `json:"time"`
	Paths   []string  `json:"paths"`
	Tags    []string  `json:"tags"`
}

// snapshots lists the restic snapshots, or only those of ids.
func (r *repository) snapshots(ctx context.Context, ids ...string) ([]resticSnapshot, error) {
	// A listing takes no lock: it reads, and must not wait for a forget or a backup.
	out, err := r.run(ctx, "listing snapshots of", nil, append([]string{"snapshots", "--no-lock", "--json"}, ids...)...)
	if err != nil {
		return nil, err
	}
	var list []resticSnapshot
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("listing snapshots of restic repository %s: reading restic's output: %w", r.url, err)
	}
	return list, nil
}

// backupSummary is the last line of `restic backup --json`.
type backupSummary struct {
	MessageType string `json:"message_type"`
	SnapshotID  string `json:"snapshot_id"`
}

// shortID finds the short id of the new snapshot in the output of restic backup.
func shortID(out []byte) (string, error) {
	if id := snapshotID(out); id != "" {
		return id, nil
	}
	return "", errors.New("restic backup did not say the id of its snapshot")
}

// snapshotID finds the short id of the new snapshot in the output of restic backup.
func snapshotID(out []byte) string {
	for _, line := range bytes.Split(out, []byte("\n")) {
		var s backupSummary
		if json.Unmarshal(line, &s) == nil && s.MessageType == "summary" && s.SnapshotID != "" {
			return s.SnapshotID
		}
	}
	return ""
}

// fullIDs turns the short ids restic backup prints into full ids, in one call.
func (r *repository) fullIDs(ctx context.Context, short ...string) ([]string, error) {
	list, err := r.snapshots(ctx, short...)
	if err != nil {
		return nil, err
	}
	full := make([]string, len(short))
	for i, id := range short {
		for _, s := range list {
			if s.ShortID == id {
				full[i] = s.ID
			}
		}
		if full[i] == "" {
			return nil, fmt.Errorf("finding the new snapshot %s in restic repository %s: restic does not list it", id, r.url)
		}
	}
	return full, nil
}
