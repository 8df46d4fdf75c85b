package deploy

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/fedhost/fedhost/host/store"
)

// Update policies.
const (
	PolicyManual    = "manual"
	PolicyAutomatic = "automatic"
	PolicyWindow    = "window"
)

// UpdatePolicy is how a deployment takes new catalog revisions.
type UpdatePolicy struct {
	Policy        string `json:"policy"`
	WindowStart   string `json:"window_start,omitempty"`
	WindowMinutes int    `json:"window_minutes,omitempty"`
	TimeZone      string `json:"time_zone,omitempty"`
}

var clockTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

// SetUpdatePolicy checks and stores a deployment's update policy.
func (e *Engine) SetUpdatePolicy(ctx context.Context, id string, p UpdatePolicy) (UpdatePolicy, error) {
	if _, err := e.Deployment(ctx, id); err != nil {
		return UpdatePolicy{}, err
	}
	if p.TimeZone == "" {
		p.TimeZone = "UTC"
	}
	switch p.Policy {
	case PolicyManual, PolicyAutomatic:
		p.WindowStart, p.WindowMinutes = "", 0
	case PolicyWindow:
		if !clockTime.MatchString(p.WindowStart) {
			return UpdatePolicy{}, refuse(CodeInvalidConfiguration, "/window_start", "the window's start is a time of day as HH:MM")
		}
		if p.WindowMinutes < 15 || p.WindowMinutes > 24*60 {
			return UpdatePolicy{}, refuse(CodeInvalidConfiguration, "/window_minutes", "a window lasts 15 minutes to 24 hours (15 to 1440)")
		}
	default:
		return UpdatePolicy{}, refuse(CodeInvalidConfiguration, "/policy", "the policy is manual, automatic or window")
	}
	if _, err := time.LoadLocation(p.TimeZone); err != nil {
		return UpdatePolicy{}, refuse(CodeInvalidConfiguration, "/time_zone", "not a time zone name of the IANA database, such as Europe/Amsterdam")
	}
	err := e.opts.Store.UpdateDeployment(ctx, id, map[string]any{
		"update_policy": p.Policy, "update_window_start": p.WindowStart,
		"update_window_minutes": p.WindowMinutes, "time_zone": p.TimeZone,
	})
	return p, err
}

// PolicyOf returns a deployment's update policy.
func PolicyOf(d store.Deployment) UpdatePolicy {
	p := UpdatePolicy{Policy: d.UpdatePolicy, WindowStart: d.UpdateWindowStart, WindowMinutes: d.UpdateWindowMinutes, TimeZone: d.TimeZone}
	if p.Policy == "" {
		p.Policy = PolicyManual
	}
	return p
}

// Cancel cancels a queued or running build.
func (e *Engine) Cancel(ctx context.Context, buildID string) error {
	err := e.queue.Cancel(ctx, buildID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse(CodeNotFound, "", "no such build: check its id (GET /api/v1/jobs lists them)")
	case errors.Is(err, store.ErrBuildFinished):
		return refuse(CodeConflict, "", "%v", err)
	}
	return err
}
