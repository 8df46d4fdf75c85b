package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
)

// Contact is an operator's contact for the domains registered for them.
type Contact struct {
	ID           string `gorm:"primaryKey"`
	Owner        string
	Name         string
	Organization string
	Email        string
	// Phone is E.164 (+4930123456), Country ISO 3166-1 alpha-2: checked by the engine.
	Phone      string
	Street     string
	City       string
	PostalCode string
	Country    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Domain modes.
const (
	// DomainDelegated: the operator's own domain, delegated to the provider's nameservers.
	DomainDelegated = "delegated"
	// DomainRegistered: registered for the operator through a registrar.
	DomainRegistered = "registered"
)

// Domain is a deployment's domain and where its registration or delegation stands.
type Domain struct {
	Name         string `gorm:"primaryKey"`
	DeploymentID string
	Owner        string
	Mode         string
	// Registrar names the registrar plugin of a registered domain.
	Registrar string
	State     string
	ContactID string
	// PriceMicros and Currency are the price of one year the operator confirmed.
	PriceMicros int64
	Currency    string
	// ConfirmationKey is the key of the operator's confirmation, the registration's
	// idempotency key: recorded before the registrar is asked.
	ConfirmationKey string
	// Renewal is auto or manual.
	Renewal   string
	ExpiresAt *time.Time
	Locked    bool
	DNSSEC    bool `gorm:"column:dnssec"`
	// Nameservers are the registrar's (registered) or those to set (delegated),
	// space-separated.
	Nameservers string
	// Message says what went wrong last, or what the operator is to do; empty when fine.
	Message   string
	CheckedAt *time.Time
	UpdatedAt time.Time
}

// RegistrarSnapshot is when a registrar's account was last listed.
type RegistrarSnapshot struct {
	Registrar string `gorm:"primaryKey"`
	TakenAt   time.Time
	Domains   int
}

// Domain event kinds.
const (
	DomainEventRegistration = "registration"
	DomainEventRenewal      = "renewal"
	DomainEventTransferIn   = "transfer_in"
	DomainEventTransferOut  = "transfer_out"
	DomainEventRelease      = "release"
	DomainEventExpiry       = "expiry"
	DomainEventChange       = "change"
)

// DomainEvent is one thing that happened to a domain, with its cost as the registrar
// quoted it (0 for what costs nothing).
type DomainEvent struct {
	ID           string `gorm:"primaryKey"`
	Time         time.Time
	Domain       string
	DeploymentID string
	Owner        string
	Registrar    string
	Kind         string
	CostMicros   int64
	Currency     string
	Detail       string
}

// AppPeriod is a time an app of a deployment was enabled, and the resources it held
// (space-separated types); EndedAt is nil while it lasts.
type AppPeriod struct {
	DeploymentID string    `gorm:"primaryKey"`
	App          string    `gorm:"primaryKey"`
	StartedAt    time.Time `gorm:"primaryKey"`
	Owner        string
	EndedAt      *time.Time
	Resources    string
}

// PutContact stores a new contact of its owner (ID empty) or changes one of theirs.
func (s *Store) PutContact(ctx context.Context, c Contact) (Contact, error) {
	t := now()
	c.UpdatedAt = t
	if c.ID == "" {
		c.ID, c.CreatedAt = newID(), t
		if err := s.db.WithContext(ctx).Create(&c).Error; err != nil {
			return Contact{}, fmt.Errorf("storing a contact: %w", err)
		}
		return c, nil
	}
	res := s.db.WithContext(ctx).Model(&Contact{}).Where("id = ? AND owner = ?", c.ID, c.Owner).
		Select("name", "organization", "email", "phone", "street", "city", "postal_code", "country", "updated_at").Updates(&c)
	if res.Error != nil {
		return Contact{}, fmt.Errorf("changing contact %s: %w", c.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return Contact{}, fmt.Errorf("contact %s: %w", c.ID, ErrNotFound)
	}
	return s.GetContact(ctx, c.Owner, c.ID)
}

// GetContact returns a contact of owner.
func (s *Store) GetContact(ctx context.Context, owner, id string) (Contact, error) {
	var c Contact
	err := s.db.WithContext(ctx).Where("id = ? AND owner = ?", id, owner).Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Contact{}, fmt.Errorf("contact %s: %w", id, ErrNotFound)
	}
	return c, err
}

// Contacts lists owner's contacts, oldest first.
func (s *Store) Contacts(ctx context.Context, owner string) ([]Contact, error) {
	var cs []Contact
	err := s.db.WithContext(ctx).Where("owner = ?", owner).Order("created_at, id").Find(&cs).Error
	return cs, err
}

// PutDomain stores d whole, replacing the record of its name.
func (s *Store) PutDomain(ctx context.Context, d Domain) error {
	d.UpdatedAt = now()
	if d.Renewal == "" {
		d.Renewal = "auto"
	}
	if err := s.db.WithContext(ctx).Save(&d).Error; err != nil {
		return fmt.Errorf("storing domain %s: %w", d.Name, err)
	}
	return nil
}

// GetDomain returns the record of a domain.
func (s *Store) GetDomain(ctx context.Context, name string) (Domain, error) {
	var d Domain
	err := s.db.WithContext(ctx).Where("name = ?", name).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Domain{}, fmt.Errorf("domain %s: %w", name, ErrNotFound)
	}
	return d, err
}

// Domains lists the domains of owner ("" for every owner's), by name.
func (s *Store) Domains(ctx context.Context, owner string) ([]Domain, error) {
	q := s.db.WithContext(ctx).Order("name")
	if owner != "" {
		q = q.Where("owner = ?", owner)
	}
	var ds []Domain
	return ds, q.Find(&ds).Error
}

// DomainsAwaiting returns, by name, the delegated domains in state whose delegation was
// last checked at or before checkedBy, or never: the ones the domain job checks again. The
// tick asks for these instead of reading every domain (index domains_mode_state).
func (s *Store) DomainsAwaiting(ctx context.Context, state string, checkedBy time.Time) ([]Domain, error) {
	var ds []Domain
	// The columns hold microseconds: truncated, the bound answers the same.
	err := s.db.WithContext(ctx).Where("mode = ? AND state = ? AND (checked_at IS NULL OR checked_at <= ?)", DomainDelegated, state, checkedBy.UTC().Truncate(time.Microsecond)).
		Order("name").Find(&ds).Error
	if err != nil {
		return nil, fmt.Errorf("reading the domains awaiting their delegation: %w", err)
	}
	return ds, nil
}

// DomainsHeldAt returns, by name, the domains the host registered at registrar whose
// state is none of skip: the ones a snapshot of the registrar's account concerns.
func (s *Store) DomainsHeldAt(ctx context.Context, registrar string, skip []string) ([]Domain, error) {
	var ds []Domain
	q := s.db.WithContext(ctx).Where("mode = ? AND registrar = ?", DomainRegistered, registrar)
	if len(skip) > 0 {
		q = q.Where("state NOT IN ?", skip)
	}
	if err := q.Order("name").Find(&ds).Error; err != nil {
		return nil, fmt.Errorf("reading the domains held at %s: %w", registrar, err)
	}
	return ds, nil
}

// migrateDomainsDue adds the indexes of the domain job's two reads, and makes the index
// of the audit events' subjects partial (UserAuditEventsAfter says why).
func migrateDomainsDue(tx *gorm.DB) error {
	return execAll(tx,
		`CREATE INDEX domains_mode_state ON domains (mode, state, checked_at)`,
		`CREATE INDEX domains_registrar ON domains (registrar, mode)`,
		`DROP INDEX audit_events_subject`,
		`CREATE INDEX audit_events_subject ON audit_events (subject, seq) WHERE subject <> ''`,
	)
}

// UpdateDomain writes the given columns of a domain.
func (s *Store) UpdateDomain(ctx context.Context, name string, columns map[string]any) error {
	columns["updated_at"] = now()
	res := s.db.WithContext(ctx).Model(&Domain{}).Where("name = ?", name).Updates(columns)
	if res.Error != nil {
		return fmt.Errorf("updating domain %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("domain %s: %w", name, ErrNotFound)
	}
	return nil
}

// RecordDomainEvent appends an event; a zero Time is now.
func (s *Store) RecordDomainEvent(ctx context.Context, ev DomainEvent) (DomainEvent, error) {
	ev.ID = newID()
	if ev.Time.IsZero() {
		ev.Time = now()
	}
	if err := s.db.WithContext(ctx).Create(&ev).Error; err != nil {
		return DomainEvent{}, fmt.Errorf("recording a %s of %s: %w", ev.Kind, ev.Domain, err)
	}
	return ev, nil
}

// DomainEvents returns a domain's events, newest first, at most limit.
func (s *Store) DomainEvents(ctx context.Context, domain string, limit int) ([]DomainEvent, error) {
	var evs []DomainEvent
	err := s.db.WithContext(ctx).Where("domain = ?", domain).Order("time DESC, id DESC").Limit(limit).Find(&evs).Error
	return evs, err
}

// DomainEventsBetween returns the events in [from, to) of owner ("" for all), oldest
// first.
func (s *Store) DomainEventsBetween(ctx context.Context, owner string, from, to time.Time) ([]DomainEvent, error) {
	q := s.db.WithContext(ctx).Where("time >= ? AND time < ?", from.UTC(), to.UTC()).Order("time, id")
	if owner != "" {
		q = q.Where("owner = ?", owner)
	}
	var evs []DomainEvent
	return evs, q.Find(&evs).Error
}

// SnapshotTaken records that a registrar's account was listed at t with n domains.
func (s *Store) SnapshotTaken(ctx context.Context, registrar string, t time.Time, n int) error {
	return s.db.WithContext(ctx).Save(&RegistrarSnapshot{Registrar: registrar, TakenAt: t.UTC(), Domains: n}).Error
}

// LastSnapshot is when a registrar's account was last listed; zero if never.
func (s *Store) LastSnapshot(ctx context.Context, registrar string) (time.Time, error) {
	var r RegistrarSnapshot
	err := s.db.WithContext(ctx).Where("registrar = ?", registrar).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return time.Time{}, nil
	}
	return r.TakenAt, err
}

// RecordAppPeriods brings a deployment's periods in step with the apps enabled at t
// (app -> the resource types it holds): a period opens for an app newly enabled, and the
// open period of an app no longer enabled ends at t.
func (s *Store) RecordAppPeriods(ctx context.Context, deploymentID, owner string, enabled map[string]string, t time.Time) error {
	t = t.UTC()
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var open []AppPeriod
		if err := tx.Where("deployment_id = ? AND ended_at IS NULL", deploymentID).Find(&open).Error; err != nil {
			return err
		}
		isOpen := map[string]bool{}
		for _, p := range open {
			if res, on := enabled[p.App]; on {
				isOpen[p.App] = true
				if res != p.Resources {
					if err := tx.Model(&AppPeriod{}).Where("deployment_id = ? AND app = ? AND started_at = ?", deploymentID, p.App, p.StartedAt).
						Update("resources", res).Error; err != nil {
						return err
					}
				}
				continue
			}
			if err := tx.Model(&AppPeriod{}).Where("deployment_id = ? AND app = ? AND started_at = ?", deploymentID, p.App, p.StartedAt).
				Update("ended_at", t).Error; err != nil {
				return err
			}
		}
		apps := make([]string, 0, len(enabled))
		for app := range enabled {
			apps = append(apps, app)
		}
		sort.Strings(apps)
		for _, app := range apps {
			if isOpen[app] {
				continue
			}
			if err := tx.Create(&AppPeriod{DeploymentID: deploymentID, App: app, StartedAt: t, Owner: owner, Resources: enabled[app]}).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// AppPeriodsBetween returns the periods of owner ("" for all) that overlap [from, to),
// by start.
func (s *Store) AppPeriodsBetween(ctx context.Context, owner string, from, to time.Time) ([]AppPeriod, error) {
	q := s.db.WithContext(ctx).Where("started_at < ? AND (ended_at IS NULL OR ended_at > ?)", to.UTC(), from.UTC()).
		Order("started_at, deployment_id, app")
	if owner != "" {
		q = q.Where("owner = ?", owner)
	}
	var ps []AppPeriod
	return ps, q.Find(&ps).Error
}

// DeploymentDomain returns the record of a deployment's domain.
func (s *Store) DeploymentDomain(ctx context.Context, deploymentID string) (Domain, error) {
	var d Domain
	err := s.db.WithContext(ctx).Where("deployment_id = ?", deploymentID).Order("updated_at DESC").Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Domain{}, fmt.Errorf("domain of deployment %s: %w", deploymentID, ErrNotFound)
	}
	return d, err
}
