package deploy

import (
	"context"
	"encoding/csv"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/store"
)

// maxUsageRange bounds a usage query: a few years of billing at most.
const maxUsageRange = 5 * 366 * 24 * time.Hour

// recordUsage brings the deployment's app periods in step with a finished build: a
// deploy that succeeded opens a period for each app it enabled (with the resource types
// the app holds) and ends those of apps it no longer enables; a destroy ends them all.
func (r *run) recordUsage(ctx context.Context, buildErr error) {
	enabled := map[string]string{}
	switch {
	case r.build.Operation == store.OperationDestroy && buildErr == nil:
	case r.build.Operation == store.OperationDeploy && buildErr == nil:
		cfg, err := catalog.ParseConfig([]byte(r.build.Config))
		if err != nil {
			return
		}
		rows, err := r.e.opts.Store.Resources(ctx, r.d.ID)
		if err != nil {
			r.e.log.Error("reading resources for usage", "deployment", r.d.ID, "error", err)
			return
		}
		types := map[string][]string{}
		for _, row := range rows {
			if row.State == store.ResourceProvisioned && !slices.Contains(types[row.App], row.Type) {
				types[row.App] = append(types[row.App], row.Type)
			}
		}
		for name, a := range cfg.Apps {
			if a.Enable {
				sort.Strings(types[name])
				enabled[name] = strings.Join(types[name], " ")
			}
		}
	default:
		return
	}
	if err := r.e.opts.Store.RecordAppPeriods(ctx, r.d.ID, r.d.Owner, enabled, r.e.now()); err != nil {
		r.e.log.Error("recording app periods", "deployment", r.d.ID, "error", err)
	}
}

// UsageEvent is a domain event as usage shows it.
type UsageEvent struct {
	Time         time.Time `json:"time"`
	Owner        string    `json:"owner"`
	DeploymentID string    `json:"deployment_id"`
	Domain       string    `json:"domain"`
	Registrar    string    `json:"registrar"`
	Kind         string    `json:"kind"`
	CostMicros   int64     `json:"cost_micros"`
	Currency     string    `json:"currency"`
	Detail       string    `json:"detail"`
}

// UsagePeriod is a time an app was enabled, cut to the range asked for.
type UsagePeriod struct {
	Owner        string    `json:"owner"`
	DeploymentID string    `json:"deployment_id"`
	App          string    `json:"app"`
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	// Ongoing: the app is still enabled; End is the end of the range or now.
	Ongoing   bool     `json:"ongoing"`
	Resources []string `json:"resources"`
	Hours     float64  `json:"hours"`
}

// UsageTotal sums one operator's month: the domain costs in one currency ("" when
// nothing cost anything) and the hours apps were enabled.
type UsageTotal struct {
	Owner      string  `json:"owner"`
	Month      string  `json:"month"`
	Currency   string  `json:"currency"`
	CostMicros int64   `json:"cost_micros"`
	AppHours   float64 `json:"app_hours"`
}

// Usage is what operators used in [From, To), for billing.
type Usage struct {
	From    time.Time     `json:"from"`
	To      time.Time     `json:"to"`
	Events  []UsageEvent  `json:"events"`
	Periods []UsagePeriod `json:"periods"`
	Totals  []UsageTotal  `json:"totals"`
}

// Usage reports the domain events and app periods of owner ("" for every operator's) in
// [from, to), with totals per operator and month (UTC).
func (e *Engine) Usage(ctx context.Context, owner string, from, to time.Time) (Usage, error) {
	from, to = from.UTC(), to.UTC()
	if !from.Before(to) || to.Sub(from) > maxUsageRange {
		return Usage{}, refuse(CodeInvalidConfiguration, "/from", "give from before to, at most 5 years apart, as RFC 3339 times or dates (2026-05-01)")
	}
	evs, err := e.opts.Store.DomainEventsBetween(ctx, owner, from, to)
	if err != nil {
		return Usage{}, err
	}
	ps, err := e.opts.Store.AppPeriodsBetween(ctx, owner, from, to)
	if err != nil {
		return Usage{}, err
	}
	out := Usage{From: from, To: to, Events: []UsageEvent{}, Periods: []UsagePeriod{}, Totals: []UsageTotal{}}
	type key struct{ owner, month, currency string }
	totals := map[key]*UsageTotal{}
	total := func(k key) *UsageTotal {
		if t, ok := totals[k]; ok {
			return t
		}
		t := &UsageTotal{Owner: k.owner, Month: k.month, Currency: k.currency}
		totals[k] = t
		return t
	}
	for _, ev := range evs {
		out.Events = append(out.Events, UsageEvent{Time: ev.Time.UTC(), Owner: ev.Owner, DeploymentID: ev.DeploymentID, Domain: ev.Domain,
			Registrar: ev.Registrar, Kind: ev.Kind, CostMicros: ev.CostMicros, Currency: ev.Currency, Detail: ev.Detail})
		if ev.CostMicros != 0 {
			total(key{ev.Owner, ev.Time.UTC().Format("2006-01"), ev.Currency}).CostMicros += ev.CostMicros
		}
	}
	now := e.now().UTC()
	for _, p := range ps {
		start, end, ongoing := p.StartedAt.UTC(), to, p.EndedAt == nil
		if !ongoing && p.EndedAt.Before(end) {
			end = p.EndedAt.UTC()
		}
		if ongoing && now.Before(end) {
			end = now
		}
		if start.Before(from) {
			start = from
		}
		if !start.Before(end) {
			continue
		}
		res := strings.Fields(p.Resources)
		if res == nil {
			res = []string{}
		}
		out.Periods = append(out.Periods, UsagePeriod{Owner: p.Owner, DeploymentID: p.DeploymentID, App: p.App, Start: start, End: end,
			Ongoing: ongoing, Resources: res, Hours: hours(end.Sub(start))})
		// The hours fall into each month the period spans.
		for s := start; s.Before(end); {
			next := time.Date(s.Year(), s.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			if end.Before(next) {
				next = end
			}
			total(key{p.Owner, s.Format("2006-01"), ""}).AppHours += next.Sub(s).Hours()
			s = next
		}
	}
	// App hours go with the month's first currency, so each month is one row where it
	// can be.
	for k, t := range totals {
		if k.currency != "" {
			continue
		}
		for k2, t2 := range totals {
			if k2.currency != "" && k2.owner == k.owner && k2.month == k.month {
				t2.AppHours += t.AppHours
				delete(totals, k)
				break
			}
		}
	}
	for _, t := range totals {
		t.AppHours = hours(time.Duration(t.AppHours * float64(time.Hour)))
		out.Totals = append(out.Totals, *t)
	}
	sort.Slice(out.Totals, func(i, j int) bool {
		a, b := out.Totals[i], out.Totals[j]
		if a.Owner != b.Owner {
			return a.Owner < b.Owner
		}
		if a.Month != b.Month {
			return a.Month < b.Month
		}
		return a.Currency < b.Currency
	})
	return out, nil
}

// hours rounds a duration to hundredths of an hour.
func hours(d time.Duration) float64 {
	return float64(d.Round(36*time.Second)/(36*time.Second)) / 100
}

// WriteCSV writes the usage as one table: a row per event, period and total, the
// record column saying which.
func (u Usage) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"record", "owner", "month", "deployment_id", "subject", "kind", "start", "end", "hours", "cost_micros", "currency", "detail"})
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	for _, ev := range u.Events {
		_ = cw.Write(safeRow("event", ev.Owner, ev.Time.UTC().Format("2006-01"), ev.DeploymentID, ev.Domain, ev.Kind, ts(ev.Time), ts(ev.Time), "",
			strconv.FormatInt(ev.CostMicros, 10), ev.Currency, ev.Detail))
	}
	for _, p := range u.Periods {
		_ = cw.Write(safeRow("period", p.Owner, p.Start.Format("2006-01"), p.DeploymentID, p.App, strings.Join(p.Resources, " "), ts(p.Start), ts(p.End),
			strconv.FormatFloat(p.Hours, 'f', 2, 64), "", "", ""))
	}
	for _, t := range u.Totals {
		_ = cw.Write(safeRow("total", t.Owner, t.Month, "", "", "", "", "", strconv.FormatFloat(t.AppHours, 'f', 2, 64),
			strconv.FormatInt(t.CostMicros, 10), t.Currency, ""))
	}
	cw.Flush()
	return cw.Error()
}

// safeRow keeps a spreadsheet from reading a cell as a formula.
func safeRow(cells ...string) []string {
	for i, c := range cells {
		if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
			cells[i] = "'" + c
		}
	}
	return cells
}
