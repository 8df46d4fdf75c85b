package scheduler

import (
	"fmt"
	"sync"
	"time"
)

// The deployment state the scheduler updates; any other is skipped. The names are
// those of host/deploy, which this package does not import so that the deploy engine
// can use CheckStep.
const stateActive = "active"

// The update policies, as host/deploy names them.
const (
	PolicyManual    = "manual"
	PolicyAutomatic = "automatic"
	PolicyWindow    = "window"
)

// Policy is a deployment's update policy. Its fields are those of
// host/deploy.UpdatePolicy, so scheduler.Policy(deploy.PolicyOf(d)) converts one.
type Policy struct {
	Policy        string // manual, automatic or window; "" is manual
	WindowStart   string // HH:MM, the daily opening of a window in TimeZone
	WindowMinutes int    // 15 to 1440
	TimeZone      string // an IANA name; "" is UTC
}

// Candidate is what the scheduler knows of one deployment at a tick.
type Candidate struct {
	ID              string
	State           string
	Policy          Policy
	CurrentRevision string // the catalog revision the deployment runs
	NewestRevision  string // the newest catalog revision offering its apps
	// LastAutoRevision is the revision the scheduler last submitted for this
	// deployment: each revision is tried once, so a failed update is not retried on
	// every tick.
	LastAutoRevision string
}

// Decision is the outcome of one candidate at a tick.
type Decision struct {
	ID  string
	Due bool
	// UpdateAvailable is true when a newer revision exists, due or not (what the UI
	// shows for a manual policy).
	UpdateAvailable bool
	Revision        string // the revision to submit when Due
	Reason          string
}

// Tick decides, for every candidate, whether the scheduler submits an update now.
func Tick(now time.Time, candidates []Candidate) []Decision {
	out := make([]Decision, len(candidates))
	for i, c := range candidates {
		due, reason := Due(now, c)
		out[i] = Decision{ID: c.ID, Due: due, UpdateAvailable: updateAvailable(c), Reason: reason}
		if due {
			out[i].Revision = c.NewestRevision
		}
	}
	return out
}

func updateAvailable(c Candidate) bool {
	return c.NewestRevision != "" && c.NewestRevision != c.CurrentRevision
}

// Due reports whether the scheduler submits deployment d's stored configuration
// against its newest revision at now, and why (or why not).
func Due(now time.Time, d Candidate) (bool, string) {
	if d.State != stateActive {
		return false, fmt.Sprintf("skipped: the deployment is %s, only active deployments are updated", orNone(d.State))
	}
	if !updateAvailable(d) {
		return false, fmt.Sprintf("up to date at revision %s", orNone(d.CurrentRevision))
	}
	available := fmt.Sprintf("update available: revision %s (runs %s)", d.NewestRevision, orNone(d.CurrentRevision))
	switch d.Policy.Policy {
	case PolicyManual, "":
		return false, available + "; the policy is manual: the operator applies it"
	case PolicyAutomatic, PolicyWindow:
	default:
		return false, fmt.Sprintf("%s; the update policy %q is not manual, automatic or window", available, d.Policy.Policy)
	}
	if d.LastAutoRevision == d.NewestRevision {
		return false, available + "; already submitted once by the scheduler (each revision is tried once): the operator applies it"
	}
	if d.Policy.Policy == PolicyAutomatic {
		return true, available + "; the policy is automatic"
	}
	in, why := inWindow(now, d.Policy)
	return in, available + "; " + why
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// inWindow reports whether now is inside the policy's daily window. The window opens
// when the local clock first shows WindowStart (on a day the clock jumps over it, when
// the clock would have shown it: 02:30 is 03:30 on the day 02:00 becomes 03:00) and
// lasts WindowMinutes of real time, so a DST change neither skips nor doubles a day's
// window; a 1440-minute window is open all the time.
func inWindow(now time.Time, p Policy) (bool, string) {
	loc, err := location(p.TimeZone)
	if err != nil {
		return false, fmt.Sprintf("the time zone %q does not load (%v): set the deployment's time zone to an IANA name such as Europe/Amsterdam", p.TimeZone, err)
	}
	hh, mm, ok := clockTime(p.WindowStart)
	if !ok {
		return false, fmt.Sprintf("the window start %q is not a time of day as HH:MM", p.WindowStart)
	}
	if p.WindowMinutes < 15 || p.WindowMinutes > 24*60 {
		return false, fmt.Sprintf("the window of %d minutes is not 15 to 1440 minutes", p.WindowMinutes)
	}
	desc := fmt.Sprintf("window %s for %d minutes in %s", p.WindowStart, p.WindowMinutes, loc)
	if p.WindowMinutes == 24*60 {
		return true, "inside the " + desc + " (all day)"
	}
	y, m, day := now.In(loc).Date()
	// Windows are at most a day long, so only the last opening can still be open:
	// today's, or yesterday's if today's is yet to come.
	last, next := opening(y, m, day, hh, mm, loc), time.Time{}
	if last.After(now) {
		last, next = opening(y, m, day-1, hh, mm, loc), last
	}
	if now.Before(last.Add(time.Duration(p.WindowMinutes) * time.Minute)) {
		return true, "inside the " + desc
	}
	if next.IsZero() {
		next = opening(y, m, day+1, hh, mm, loc)
	}
	return false, fmt.Sprintf("outside the %s; it opens next at %s", desc, next.Format("2006-01-02 15:04 MST"))
}

// opening is the first instant the local clock shows hh:mm on the given day.
func opening(y int, m time.Month, d, hh, mm int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, hh, mm, 0, 0, loc)
	// When the clock goes back, hh:mm may come twice and time.Date may pick the
	// second: take the first if it exists.
	_, off := t.Zone()
	if _, before := t.Add(-3 * time.Hour).Zone(); before > off {
		earlier := t.Add(-time.Duration(before-off) * time.Second)
		if earlier.Hour() == hh && earlier.Minute() == mm && earlier.Day() == t.Day() {
			return earlier
		}
	}
	return t
}

func clockTime(s string) (hh, mm int, ok bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	for _, i := range [...]int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, 0, false
		}
	}
	hh = int(s[0]-'0')*10 + int(s[1]-'0')
	mm = int(s[3]-'0')*10 + int(s[4]-'0')
	return hh, mm, hh <= 23 && mm <= 59
}

type loaded struct {
	loc *time.Location
	err error
}

// zones caches time zones by name: time.LoadLocation reads the zone database on every
// call, and a tick evaluates thousands of deployments. Failures are cached too, so an
// unknown zone costs one read per process.
var zones sync.Map // string -> loaded

func location(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if v, ok := zones.Load(name); ok {
		l := v.(loaded)
		return l.loc, l.err
	}
	loc, err := time.LoadLocation(name)
	zones.Store(name, loaded{loc, err})
	return loc, err
}
