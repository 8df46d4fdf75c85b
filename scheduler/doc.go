// Package scheduler decides when fedhost updates a deployment.
//
// The core is pure and takes the time as an argument:
//
//   - CheckStep applies an app's version guard (sdk/app.VersionGuard) to a step
//     from one app version to another: a skipped release series and a refused
//     downgrade are a *StepError naming both versions; the deploy engine fails the
//     build with it before anything changes.
//   - Due and Tick evaluate each deployment's update policy (manual, automatic,
//     window) at a given time: only active deployments are updated, each newest
//     catalog revision is submitted at most once per deployment, and a window is
//     read in the deployment's own time zone, across midnight and DST changes.
//   - ParseCron is the one parser of cron schedules (backups, periodic jobs, their
//     configuration): UTC, or the zone of a CRON_TZ= prefix; it never panics.
//
// What runs the decisions is the host's: host/queue runs the scheduler's tick and the
// retention job as River periodic jobs on robfig/cron schedules, queued by River's
// elected leader only, so in a cluster one host schedules; host/deploy turns due
// decisions into builds (updates, backups).
//
// This package does not import host/: host/deploy converts its UpdatePolicy to a
// Policy (same fields) and may call CheckStep without an import cycle.
package scheduler
