// Package backup keeps an app's PostgreSQL database and files in a restic repository
// on S3, and brings them back.
//
// A Target is one repository, s3:<endpoint>/<bucket>/<path>, created on first use. A
// backup is one or two restic snapshots taken at the same instant:
//
//   - the database: pg_dump -Fc piped into `restic backup --stdin`, stored as
//     /<database>.dump, tagged part=database;
//   - the files, when there are any: a second snapshot of the given paths, tagged
//     part=files. restic 0.14 cannot read stdin and paths in one snapshot, and a temp
//     file would hold the whole dump on disk.
//
// The database snapshot names the files snapshot in its tag files-snapshot=<short id>,
// so its id is the id of the whole backup: Snapshots lists it, Restore takes it, and
// Forget removes both together because they share a time. A backup of files alone is
// a single files snapshot. Every snapshot records the host name "fedhost", so that the
// hosts of a cluster share one history. Restore puts each file at its absolute path
// below the directory it is given.
//
// Each restic run derives the repository key from the password (about 0.7 s on a small
// machine): a backup runs restic four times, five on first use.
//
// Passwords and keys reach the child processes (pg_dump, pg_restore, restic) only in
// their environment. Errors quote the last lines the child wrote to stderr, with every
// secret value replaced.
package backup
