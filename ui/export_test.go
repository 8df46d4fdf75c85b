package ui

import (
	"context"

	"github.com/fedhost/fedhost/host/backup"
)

// SetSnapshots replaces how u lists an app's backups: the engine asks a restic
// repository in S3, which the tests of the pages do without.
func SetSnapshots(u *UI, f func(ctx context.Context, deploymentID, app string) ([]backup.Snapshot, error)) {
	u.snapshots = f
}
