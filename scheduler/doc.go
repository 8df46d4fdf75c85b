// Package scheduler decides when fedhost updates a deployment, and runs the
// schedules that ask it (issue 6).
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
//
// Scheduler holds the robfig/cron schedules (ticks, backups, retention sweeps). The
// cron fires by the real clock; a job receives the injected Clock's time, so tests
// decide what a tick sees. The host turns due decisions into River jobs; in a
// cluster only the leader starts a Scheduler.
//
// This package does not import host/: host/deploy converts its UpdatePolicy to a
// Policy (same fields) and may call CheckStep without an import cycle.
package scheduler
