package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseCron parses a schedule the way every part of fedhost does (configuration,
// backups, periodic jobs): five cron fields or a descriptor (@daily, @every 12h), in UTC
// unless it starts with CRON_TZ=<IANA zone> (or TZ=), which makes the fields read in that
// zone: "CRON_TZ=Europe/Amsterdam 0 3 * * *" is 03:00 Amsterdam time, across DST.
//
// robfig/cron panics on a zone prefix with nothing after it and reads "CRON_TZ= ..." as
// UTC; ParseCron refuses both and never panics. Its errors do not repeat the schedule.
func ParseCron(spec string) (s cron.Schedule, err error) {
	spec = strings.TrimSpace(spec)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		rest, ok := strings.CutPrefix(spec, prefix)
		if !ok {
			continue
		}
		zone, fields, _ := strings.Cut(rest, " ")
		if zone == "" {
			return nil, fmt.Errorf("%s names no time zone; give an IANA name, such as %sEurope/Amsterdam 0 3 * * *", prefix, prefix)
		}
		if strings.TrimSpace(fields) == "" {
			return nil, fmt.Errorf("has a time zone but no schedule after it; put five cron fields or a descriptor after the zone, such as %sEurope/Amsterdam 0 3 * * *", prefix)
		}
		if _, err := time.LoadLocation(zone); err != nil {
			return nil, errors.New("the time zone is not a name of the IANA time zone database, such as Europe/Amsterdam or UTC")
		}
	}
	if spec == "" {
		return nil, errors.New("the schedule is empty; " + cronHint)
	}
	defer func() {
		// robfig/cron indexes the spec without checking it in places; a spec that makes it
		// panic is an invalid one.
		if r := recover(); r != nil {
			s, err = nil, errors.New("the schedule cannot be parsed; "+cronHint)
		}
	}()
	s, err = cron.ParseStandard(spec)
	if err != nil {
		// robfig/cron's messages end in the part of the spec they refuse
		// ("expected exactly 5 fields, found 2: [every day]"); an error never echoes
		// the input, so only what comes before it is kept.
		msg, _, _ := strings.Cut(err.Error(), ": ")
		return nil, fmt.Errorf("%s; %s", msg, cronHint)
	}
	return s, nil
}

const cronHint = "use five cron fields such as 30 3 * * *, or @daily, @hourly, @every 12h, optionally after a time zone such as CRON_TZ=Europe/Amsterdam"
