package scheduler

import (
	"strings"
	"testing"
	"time"
)

func TestParseCronRefusesWithoutPanic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"CRON_TZ=Europe/Amsterdam", "no schedule after it"},
		{"CRON_TZ=", "names no time zone"},
		{"CRON_TZ= 0 3 * * *", "names no time zone"},
		{"TZ=UTC", "no schedule after it"},
		{"TZ=", "names no time zone"},
		{"CRON_TZ=Europe/Amsterdam\t0\t3\t*\t*\t*", "no schedule after it"},
		{"CRON_TZ=Nowhere/Atlantis 0 3 * * *", "IANA time zone database"},
		{"   ", "empty"},
		{"every day", "five cron fields"},
		{"@every", "five cron fields"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := ParseCron(tc.spec)
			if err == nil {
				t.Fatalf("ParseCron(%q) gave no error", tc.spec)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseCron(%q) = %v, want it to say %q", tc.spec, err, tc.want)
			}
		})
	}
}

func TestParseCronReadsTheZone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec       string
		from, want time.Time
	}{
		// 03:00 in Amsterdam: 02:00 UTC in winter, 01:00 UTC from the night the clocks go
		// forward.
		{"CRON_TZ=Europe/Amsterdam 0 3 * * *", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 11, 2, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Amsterdam 0 3 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)},
		{"TZ=America/New_York 30 6 * * *", time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 7, 1, 10, 30, 0, 0, time.UTC)},
		{"0 3 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 3, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Asia/Tokyo @daily", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 15, 0, 0, 0, time.UTC)},
	} {
		s, err := ParseCron(tc.spec)
		if err != nil {
			t.Fatalf("ParseCron(%q): %v", tc.spec, err)
		}
		if got := s.Next(tc.from); !got.Equal(tc.want) {
			t.Errorf("%q after %s: next %s, want %s", tc.spec, tc.from, got.UTC(), tc.want)
		}
	}
}
