package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// domainRow is one domain on the Domains page, with its newest events.
type domainRow struct {
	D           store.Domain
	Deployment  string
	Nameservers []string
	Events      []store.DomainEvent
}

// domains shows the operator's domains (a superuser's: every operator's): state,
// registrar, expiry, lock, nameservers, DNSSEC and events.
func (u *UI) domains(c *fiber.Ctx, s *session) error {
	owner := s.ID
	if s.Superuser {
		owner = ""
	}
	ds, err := u.d.Store.Domains(s.ctx, owner)
	if err != nil {
		return err
	}
	rows := make([]domainRow, 0, len(ds))
	for _, d := range ds {
		evs, err := u.d.Store.DomainEvents(s.ctx, d.Name, 5)
		if err != nil {
			return err
		}
		name := d.DeploymentID
		if dep, err := u.d.Store.GetDeployment(s.ctx, d.DeploymentID); err == nil {
			name = dep.Name
		}
		rows = append(rows, domainRow{D: d, Deployment: name, Nameservers: strings.Fields(d.Nameservers), Events: evs})
	}
	return u.render(c, fiber.StatusOK, "domains", u.view(s, "Domains", "domains", rows))
}

type usageData struct {
	From, To string
	U        deploy.Usage
	Names    map[string]string
	CSV      string
}

// usage shows usage for billing in a range (this month by default): totals per operator
// and month, domain events with their costs, app periods. An operator sees their own, a
// superuser every operator's.
func (u *UI) usage(c *fiber.Ctx, s *session) error {
	now := time.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 1, 0)
	if v := c.Query("from"); v != "" {
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return u.refusal(c, s, fiber.StatusBadRequest, "Usage", "from is a date: 2026-05-01")
		}
		from = t
	}
	if v := c.Query("to"); v != "" {
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return u.refusal(c, s, fiber.StatusBadRequest, "Usage", "to is a date: 2026-06-01")
		}
		to = t
	}
	owner := s.ID
	if s.Superuser {
		owner = ""
	}
	report, err := u.d.Engine.Usage(s.ctx, owner, from, to)
	if err != nil {
		return err
	}
	names := map[string]string{s.ID: s.Name}
	if s.Superuser {
		users, err := u.d.Auth.Users(s.ctx)
		if err != nil {
			return err
		}
		for _, us := range users {
			names[us.ID] = us.Name
		}
	}
	f, t := from.Format(time.DateOnly), to.Format(time.DateOnly)
	return u.render(c, fiber.StatusOK, "usage", u.view(s, "Usage", "usage", usageData{From: f, To: t, U: report, Names: names,
		CSV: "/api/v1/usage?format=csv&from=" + f + "&to=" + t}))
}

// money shows millionths of a currency.
func money(micros int64, currency string) string {
	if micros == 0 && currency == "" {
		return "—"
	}
	return fmt.Sprintf("%d.%02d %s", micros/1e6, micros%1e6/1e4, currency)
}
