// Package scheduler will hold the robfig/cron schedules that enqueue updates, backups,
// retention sweeps and registrar snapshots as River jobs, with only the leader of a
// cluster scheduling (issue #6). Each deployment's update policy is already stored
// (host/deploy.UpdatePolicy).
package scheduler
