package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func at(t *testing.T, zone, clock string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	// The layout carries the offset so that an hour that comes twice is unambiguous.
	v, err := time.ParseInLocation("2006-01-02 15:04:05 -0700", clock, loc)
	require.NoError(t, err)
	return v
}

func window(start string, minutes int, zone string) Candidate {
	return Candidate{
		ID: "d1", State: stateActive, CurrentRevision: "r1", NewestRevision: "r2",
		Policy: Policy{Policy: PolicyWindow, WindowStart: start, WindowMinutes: minutes, TimeZone: zone},
	}
}

func TestDueWindow(t *testing.T) {
	t.Parallel()
	const ams = "Europe/Amsterdam"
	for _, tc := range []struct {
		name   string
		d      Candidate
		now    string // in the candidate's zone, with its offset
		due    bool
		reason string
	}{
		{name: "before the window", d: window("02:00", 60, "UTC"), now: "2026-05-04 01:59:59 +0000", reason: "opens next at 2026-05-04 02:00 UTC"},
		{name: "at the opening", d: window("02:00", 60, "UTC"), now: "2026-05-04 02:00:00 +0000", due: true, reason: "inside the window 02:00 for 60 minutes in UTC"},
		{name: "last second", d: window("02:00", 60, "UTC"), now: "2026-05-04 02:59:59 +0000", due: true},
		{name: "at the close", d: window("02:00", 60, "UTC"), now: "2026-05-04 03:00:00 +0000", reason: "opens next at 2026-05-05 02:00 UTC"},
		{name: "empty zone is UTC", d: window("02:00", 60, ""), now: "2026-05-04 02:30:00 +0000", due: true},
		{name: "in the deployment's zone, not UTC", d: window("02:00", 60, "Asia/Kolkata"), now: "2026-05-04 02:10:00 +0530", due: true},
		{name: "UTC's 02:10 is not Kolkata's", d: window("02:00", 60, "Asia/Kolkata"), now: "2026-05-04 07:40:00 +0530"},
		{name: "across midnight, before it", d: window("23:30", 90, ams), now: "2026-05-04 23:45:00 +0200", due: true},
		{name: "across midnight, after it", d: window("23:30", 90, ams), now: "2026-05-05 00:59:59 +0200", due: true},
		{name: "across midnight, closed", d: window("23:30", 90, ams), now: "2026-05-05 01:00:00 +0200"},
		{name: "across midnight, not yet open", d: window("23:30", 90, ams), now: "2026-05-04 23:29:00 +0200"},
		{name: "all day", d: window("06:00", 1440, ams), now: "2026-05-04 05:59:00 +0200", due: true, reason: "all day"},

		// 2026-03-29, Amsterdam: 02:00 CET becomes 03:00 CEST; 02:xx never shows.
		{name: "spring: a skipped start opens when 02:30 would have been", d: window("02:30", 60, ams), now: "2026-03-29 03:30:00 +0200", due: true},
		{name: "spring: not before it", d: window("02:30", 60, ams), now: "2026-03-29 03:29:00 +0200", reason: "opens next at 2026-03-29 03:30 CEST"},
		{name: "spring: 60 real minutes", d: window("02:30", 60, ams), now: "2026-03-29 04:29:59 +0200", due: true},
		{name: "spring: closed after 60 real minutes", d: window("02:30", 60, ams), now: "2026-03-29 04:30:00 +0200"},
		{name: "spring: a window over the jump lasts its real minutes", d: window("01:30", 60, ams), now: "2026-03-29 03:29:59 +0200", due: true},
		{name: "spring: and closes after them", d: window("01:30", 60, ams), now: "2026-03-29 03:30:00 +0200"},
		{name: "spring: a night window from the day before", d: window("22:00", 360, ams), now: "2026-03-29 04:59:00 +0200", due: true},
		{name: "spring: the night window closes after 6 real hours", d: window("22:00", 360, ams), now: "2026-03-29 05:00:00 +0200"},
		{name: "spring: the day after, in summer time", d: window("02:30", 60, ams), now: "2026-03-30 02:30:00 +0200", due: true},

		// 2026-10-25, Amsterdam: 03:00 CEST becomes 02:00 CET; 02:xx shows twice.
		{name: "autumn: opens at the first 02:30", d: window("02:30", 60, ams), now: "2026-10-25 02:30:00 +0200", due: true},
		{name: "autumn: before the first 02:30", d: window("02:30", 60, ams), now: "2026-10-25 02:29:00 +0200", reason: "opens next at 2026-10-25 02:30 CEST"},
		{name: "autumn: still open at the second 02:29", d: window("02:30", 60, ams), now: "2026-10-25 02:29:59 +0100", due: true},
		{name: "autumn: the second 02:30 does not open it again", d: window("02:30", 60, ams), now: "2026-10-25 02:30:00 +0100"},
		{name: "autumn: nor does the second 02:45", d: window("02:30", 60, ams), now: "2026-10-25 02:45:00 +0100"},
		{name: "autumn: the day after, in winter time", d: window("02:30", 60, ams), now: "2026-10-26 02:30:00 +0100", due: true},
		{name: "autumn: all day stays open through the extra hour", d: window("00:00", 1440, ams), now: "2026-10-25 23:30:00 +0100", due: true},
		{name: "autumn: a window over the change lasts its real minutes", d: window("01:30", 120, ams), now: "2026-10-25 02:29:59 +0100", due: true},
		{name: "autumn: and closes after them", d: window("01:30", 120, ams), now: "2026-10-25 02:30:00 +0100"},

		{name: "unknown zone is a reason", d: window("02:00", 60, "Mars/Olympus_Mons"), now: "2026-05-04 02:30:00 +0000", reason: `time zone "Mars/Olympus_Mons" does not load`},
		{name: "bad start is a reason", d: window("2:00", 60, "UTC"), now: "2026-05-04 02:30:00 +0000", reason: `window start "2:00" is not a time of day`},
		{name: "start out of range", d: window("24:00", 60, "UTC"), now: "2026-05-04 00:30:00 +0000", reason: "is not a time of day"},
		{name: "too short a window is a reason", d: window("02:00", 10, "UTC"), now: "2026-05-04 02:05:00 +0000", reason: "not 15 to 1440 minutes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zone := tc.d.Policy.TimeZone
			if zone == "" || zone == "Mars/Olympus_Mons" {
				zone = "UTC"
			}
			due, reason := Due(at(t, zone, tc.now), tc.d)
			require.Equal(t, tc.due, due, reason)
			require.Contains(t, reason, "update available: revision r2 (runs r1)")
			require.Contains(t, reason, tc.reason)
		})
	}
}

func TestDuePolicies(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	auto := func(current, newest, last string) Candidate {
		return Candidate{ID: "d1", State: stateActive, Policy: Policy{Policy: PolicyAutomatic},
			CurrentRevision: current, NewestRevision: newest, LastAutoRevision: last}
	}
	inWin := window("11:30", 60, "UTC")
	inWin.LastAutoRevision = "r2"
	for _, tc := range []struct {
		name   string
		d      Candidate
		due    bool
		reason string
	}{
		{name: "automatic, new revision", d: auto("r1", "r2", ""), due: true, reason: "the policy is automatic"},
		{name: "automatic, after trying an older one", d: auto("r1", "r3", "r2"), due: true},
		{name: "automatic, once per revision", d: auto("r1", "r2", "r2"), reason: "already submitted once"},
		{name: "automatic, up to date", d: auto("r2", "r2", "r2"), reason: "up to date at revision r2"},
		{name: "automatic, no revision known", d: auto("r1", "", ""), reason: "up to date"},
		{name: "window, once per revision too", d: inWin, reason: "already submitted once"},
		{name: "manual never due, update shown", d: Candidate{State: stateActive, Policy: Policy{Policy: PolicyManual}, CurrentRevision: "r1", NewestRevision: "r2"},
			reason: "update available: revision r2 (runs r1); the policy is manual"},
		{name: "no policy is manual", d: Candidate{State: stateActive, CurrentRevision: "r1", NewestRevision: "r2"}, reason: "the policy is manual"},
		{name: "unknown policy", d: Candidate{State: stateActive, Policy: Policy{Policy: "nightly"}, CurrentRevision: "r1", NewestRevision: "r2"}, reason: `update policy "nightly" is not`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			due, reason := Due(now, tc.d)
			require.Equal(t, tc.due, due, reason)
			require.Contains(t, reason, tc.reason)
		})
	}
}

func TestDueSkipsInactive(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	for _, state := range []string{"suspended", "destroyed", "failed", "new", "deploying", ""} {
		t.Run(state, func(t *testing.T) {
			t.Parallel()
			d := Candidate{ID: "d1", State: state, Policy: Policy{Policy: PolicyAutomatic}, CurrentRevision: "r1", NewestRevision: "r2"}
			due, reason := Due(now, d)
			require.False(t, due)
			require.Contains(t, reason, "skipped: the deployment is "+orNone(state))
		})
	}
}

func TestTick(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	got := Tick(now, []Candidate{
		{ID: "auto", State: stateActive, Policy: Policy{Policy: PolicyAutomatic}, CurrentRevision: "r1", NewestRevision: "r2"},
		{ID: "manual", State: stateActive, Policy: Policy{Policy: PolicyManual}, CurrentRevision: "r1", NewestRevision: "r2"},
		{ID: "current", State: stateActive, Policy: Policy{Policy: PolicyAutomatic}, CurrentRevision: "r2", NewestRevision: "r2"},
		{ID: "suspended", State: "suspended", Policy: Policy{Policy: PolicyAutomatic}, CurrentRevision: "r1", NewestRevision: "r2"},
	})
	require.Len(t, got, 4)
	type row struct {
		ID             string
		Due, Available bool
		Revision       string
	}
	var rows []row
	for _, d := range got {
		require.NotEmpty(t, d.Reason, d.ID)
		rows = append(rows, row{d.ID, d.Due, d.UpdateAvailable, d.Revision})
	}
	require.Equal(t, []row{
		{"auto", true, true, "r2"},
		{"manual", false, true, ""},
		{"current", false, false, ""},
		{"suspended", false, true, ""},
	}, rows)
}

// BenchmarkTick is one tick over 10,000 deployments (issue 6: at most 1 s).
func BenchmarkTick(b *testing.B) {
	zones := []string{"UTC", "Europe/Amsterdam", "America/New_York", "Asia/Tokyo", "Asia/Kolkata", "Australia/Lord_Howe", "America/Sao_Paulo", "Europe/London"}
	policies := []string{PolicyManual, PolicyAutomatic, PolicyWindow, PolicyWindow}
	candidates := make([]Candidate, 10_000)
	for i := range candidates {
		c := Candidate{
			ID: fmt.Sprintf("d%05d", i), State: stateActive, CurrentRevision: "r1", NewestRevision: "r2",
			Policy: Policy{Policy: policies[i%len(policies)], TimeZone: zones[i%len(zones)]},
		}
		if c.Policy.Policy == PolicyWindow {
			c.Policy.WindowStart = fmt.Sprintf("%02d:%02d", i%24, (i*7)%60)
			c.Policy.WindowMinutes = 15 + i%1426
		}
		switch i % 10 {
		case 0:
			c.State = "suspended"
		case 1:
			c.CurrentRevision = "r2"
		case 2:
			c.LastAutoRevision = "r2"
		}
		candidates[i] = c
	}
	now := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)
	var due int
	for b.Loop() {
		due = 0
		for _, d := range Tick(now, candidates) {
			if d.Due {
				due++
			}
		}
	}
	b.ReportMetric(float64(due), "due/tick")
}
