package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/client"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// RegistrarCase says what the kit asks of a registrar driver, and of the registrar's
// server behind it: a test server or a sandbox, never a live account, since the kit
// registers, renews and transfers domains and a registration cannot be undone.
type RegistrarCase struct {
	// Settings are handed to Configure first (nil for none).
	Settings json.RawMessage
	// Secrets are values (API keys, passwords) that must never appear in the plugin's
	// logs, in an error or in a result. Give every credential the settings lead to.
	Secrets []string

	// Available is a domain the registrar offers for registration, with a price; the kit
	// registers it for one year.
	Available string
	// Taken is a domain someone else holds: Check answers it unavailable, with a reason.
	Taken string
	// Pending is a domain the kit registers and the registry keeps StatusPending for a
	// while, then completes (StatusActive). Empty skips the pending check.
	Pending string
	// Renew is a domain the account holds already, old enough to be renewed; the kit
	// renews it for a year. Empty renews Available (for registrars that allow renewing
	// a domain just registered).
	Renew string
	// Transfer is a domain at another registrar that TransferAuthCode moves to this one.
	// Empty skips the transfer checks (reported) for drivers that do not offer them.
	Transfer         string
	TransferAuthCode string
	// Nameservers are set on Available and read back (at least two host names).
	Nameservers []string
	// Contact is a valid contact: where the driver keeps contacts, the kit creates,
	// reads, lists, updates and deletes one, and registers with one made of it.
	Contact registrar.Contact
	// ContactID is the contact to register with when the driver keeps no contacts
	// (empty: the registrar account's own).
	ContactID string
	// FollowTimeout bounds how long the kit follows a pending domain (2 minutes when 0);
	// FollowInterval is the pause between reads (1 second when 0).
	FollowTimeout  time.Duration
	FollowInterval time.Duration
}

// Registrar runs the shared checks and then the registrar driver checks against the
// binary at path, in this order, each a subtest:
//
//   - check: Available is available with a price (PriceMicros > 0) and an ISO 4217
//     currency; Taken is not, with a reason.
//   - invalid_input_names_field: a malformed domain (Check, Register, SetNameservers), the
//     registration of Taken, a number of years out of 1-10, a malformed nameserver, a confirmed price that differs
//     from the quote and, where offered, a transfer without an auth code and a contact
//     with a bad country code or phone are each refused as sdk.CodeInvalid naming the
//     field (domain, years, nameservers/0, price_micros, auth_code, country, phone),
//     without echoing the value; the refused price registers nothing.
//   - contacts (where offered): a contact is created, read back equal, listed, updated,
//     and deleted (then sdk.CodeNotFound).
//   - register: Available, at the quoted price and with an idempotency key, is active
//     (or pending, followed until it ends) with an expiry about a year away; the same
//     call again with the same key charges nothing more (the expiry is unchanged).
//   - pending: Pending answers StatusPending and, followed with registrar.Follow, ends
//     StatusActive.
//   - nameservers: set on Available and read back (DomainReader, else Snapshot).
//   - lock (where offered): lock and unlock, each read back.
//   - auth_code (where offered): a non-empty code for Available.
//   - transfer (where offered): a wrong auth code is refused naming auth_code; Transfer
//     with TransferAuthCode is pending or active and, followed, ends active.
//   - renew: Renew moves the expiry of Renew (or Available) by one year.
//   - snapshot: lists every domain the kit registered or transferred, with an expiry.
//   - no_secret_in_logs: no value of Secrets appears in the plugin's logs, in an error
//     or in a result.
//
// Optional abilities the driver does not offer (sdk.CodeUnsupported) are reported with
// t.Log, not failed.
func Registrar(t *testing.T, path string, c RegistrarCase) {
	t.Helper()
	Plugin(t, path)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	p, err := client.Start(ctx, path, client.WithLogger(logger), client.WithEnv(sdk.DataDirEnv+"="+t.TempDir()))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer p.Kill()
	if err := p.Configure(ctx, c.Settings); err != nil {
		t.Fatalf("configure: %v", err)
	}
	rc := p.Registrar()
	if rc == nil {
		t.Fatalf("%s is a %s plugin, not a registrar driver", path, p.Description().Kind)
	}
	followTimeout, followEvery := c.FollowTimeout, c.FollowInterval
	if followTimeout == 0 {
		followTimeout = 2 * time.Minute
	}
	if followEvery == 0 {
		followEvery = time.Second
	}
	k := &registrarKit{rc: rc, followTimeout: followTimeout, followEvery: followEvery}

	var quote registrar.Availability
	t.Run("check", func(t *testing.T) {
		a, err := rc.Check(ctx, c.Available)
		k.seen(a, err)
		if err != nil {
			t.Fatalf("check %s: %v", c.Available, err)
		}
		quote = a
		if !a.Available {
			t.Errorf("check %s: not available (%q), but the case gives it as available", c.Available, a.Reason)
		}
		if a.PriceMicros <= 0 {
			t.Errorf("check %s: no price (%d micros): the host shows the price before an operator confirms", c.Available, a.PriceMicros)
		}
		if !currencyRE.MatchString(a.Currency) {
			t.Errorf("check %s: currency %q is not an ISO 4217 code (USD, EUR)", c.Available, a.Currency)
		}
		b, err := rc.Check(ctx, c.Taken)
		k.seen(b, err)
		if err != nil {
			t.Fatalf("check %s: %v", c.Taken, err)
		}
		if b.Available {
			t.Errorf("check %s: available, but the case gives it as taken", c.Taken)
		}
		if strings.TrimSpace(b.Reason) == "" {
			t.Errorf("check %s: unavailable without a reason: say why, for the operator", c.Taken)
		}
	})

	t.Run("invalid_input_names_field", func(t *testing.T) {
		const badDomain = "not a domain!.test"
		_, err := rc.Check(ctx, badDomain)
		k.wantInvalid(t, "check of a malformed domain", err, "domain", badDomain)
		_, err = rc.Register(ctx, registrar.RegisterRequest{Domain: badDomain, Years: 1})
		k.wantInvalid(t, "register of a malformed domain", err, "domain", badDomain)
		_, err = rc.Register(ctx, registrar.RegisterRequest{Domain: c.Available, Years: 11})
		k.wantInvalid(t, "register for 11 years", err, "years", "")
		_, err = rc.Register(ctx, registrar.RegisterRequest{Domain: c.Taken, Years: 1, IdempotencyKey: "conformance-taken"})
		k.wantInvalid(t, "register of a taken domain", err, "domain", "")
		_, err = rc.SetNameservers(ctx, badDomain, c.Nameservers)
		k.wantInvalid(t, "nameservers of a malformed domain", err, "domain", badDomain)
		const badNS = "bad name server"
		_, err = rc.SetNameservers(ctx, c.Available, []string{badNS, "ns2.example.net"})
		k.wantInvalid(t, "a malformed nameserver", err, "nameservers/0", badNS)
		if quote.PriceMicros > 0 {
			changed := quote.PriceMicros + 10_000
			_, err = rc.Register(ctx, registrar.RegisterRequest{Domain: c.Available, Years: 1, PriceMicros: changed,
				Currency: quote.Currency, IdempotencyKey: "conformance-changed-price"})
			k.wantInvalid(t, "register at a price other than the registrar's", err, "price_micros", "")
			if a, err := rc.Check(ctx, c.Available); err == nil && !a.Available {
				t.Errorf("a register refused for its price still registered %s", c.Available)
			}
		}
		if c.Transfer != "" {
			_, err = rc.Transfer(ctx, registrar.TransferRequest{Domain: c.Transfer})
			if sdk.CodeOf(err) != sdk.CodeUnsupported {
				k.wantInvalid(t, "a transfer without an auth code", err, "auth_code", "")
			}
		}
		bad := c.Contact
		bad.ID = ""
		bad.Country = "X1"
		_, err = rc.PutContact(ctx, bad)
		if sdk.CodeOf(err) == sdk.CodeUnsupported {
			return
		}
		k.wantInvalid(t, "a contact with country code X1", err, "country", "")
		bad = c.Contact
		bad.ID = ""
		bad.Phone = "555-CALL-ME"
		_, err = rc.PutContact(ctx, bad)
		k.wantInvalid(t, "a contact with phone 555-CALL-ME", err, "phone", "555-CALL-ME")
	})

	contactID := c.ContactID
	t.Run("contacts", func(t *testing.T) {
		in := c.Contact
		in.ID = ""
		made, err := rc.PutContact(ctx, in)
		k.seen(made, err)
		if sdk.CodeOf(err) == sdk.CodeUnsupported {
			t.Logf("the driver keeps no contacts (%v)", err)
			return
		}
		if err != nil {
			t.Fatalf("create contact: %v", err)
		}
		if made.ID == "" {
			t.Fatalf("a created contact has no id")
		}
		got, err := rc.GetContact(ctx, made.ID)
		k.seen(got, err)
		if err != nil {
			t.Fatalf("read contact %s: %v", made.ID, err)
		}
		in.ID = made.ID
		if got != in {
			t.Errorf("contact read back differs:\nput %+v\ngot %+v", in, got)
		}
		list, err := rc.ListContacts(ctx)
		k.seen(list, err)
		if err != nil {
			t.Fatalf("list contacts: %v", err)
		}
		if !slices.ContainsFunc(list, func(x registrar.Contact) bool { return x.ID == made.ID }) {
			t.Errorf("the contact list lacks %s", made.ID)
		}
		changed := in
		changed.City += " Nord"
		upd, err := rc.PutContact(ctx, changed)
		k.seen(upd, err)
		if err != nil {
			t.Fatalf("update contact %s: %v", made.ID, err)
		}
		if got, err := rc.GetContact(ctx, upd.ID); err != nil || got.City != changed.City {
			t.Errorf("the updated city did not stick: %+v, %v", got, err)
		}
		if err := rc.DeleteContact(ctx, upd.ID); err != nil {
			t.Fatalf("delete contact %s: %v", upd.ID, err)
		}
		if _, err := rc.GetContact(ctx, upd.ID); sdk.CodeOf(err) != sdk.CodeNotFound {
			t.Errorf("a deleted contact reads as %v, want %s", err, sdk.CodeNotFound)
		}
		// The one the kit registers with.
		owner := c.Contact
		owner.ID = ""
		owner, err = rc.PutContact(ctx, owner)
		k.seen(owner, err)
		if err != nil {
			t.Fatalf("create the owner contact: %v", err)
		}
		contactID = owner.ID
	})

	var registered registrar.Domain
	var owned []string
	t.Run("register", func(t *testing.T) {
		req := registrar.RegisterRequest{Domain: c.Available, Years: 1,
			OwnerContact: contactID, AdminContact: contactID, TechContact: contactID, BillingContact: contactID,
			PriceMicros: quote.PriceMicros, Currency: quote.Currency,
			IdempotencyKey: fmt.Sprintf("conformance-%d", time.Now().UnixNano())}
		before := time.Now()
		d, err := rc.Register(ctx, req)
		k.seen(d, err)
		if err != nil {
			t.Fatalf("register %s: %v", c.Available, err)
		}
		d = k.follow(t, d)
		if d.Status != registrar.StatusActive {
			t.Fatalf("register %s: status %q, want %q", c.Available, d.Status, registrar.StatusActive)
		}
		owned = append(owned, d.Name)
		registered = d
		if !aboutYearsAfter(d.Expires, before, 1) {
			t.Errorf("register %s for a year: expiry %v", c.Available, d.Expires)
		}
		again, err := rc.Register(ctx, req)
		k.seen(again, err)
		if err != nil {
			t.Fatalf("register %s again with the same idempotency key: %v (a retry of one confirmation must answer the domain)", c.Available, err)
		}
		if !again.Expires.Equal(d.Expires) {
			t.Errorf("a register repeated with the same idempotency key moved the expiry from %v to %v: it was charged twice", d.Expires, again.Expires)
		}
	})

	t.Run("pending", func(t *testing.T) {
		if c.Pending == "" {
			t.Log("the case gives no domain the registry keeps pending")
			return
		}
		a, err := rc.Check(ctx, c.Pending)
		k.seen(a, err)
		if err != nil {
			t.Fatalf("check %s: %v", c.Pending, err)
		}
		d, err := rc.Register(ctx, registrar.RegisterRequest{Domain: c.Pending, Years: 1,
			OwnerContact: contactID, AdminContact: contactID, TechContact: contactID, BillingContact: contactID,
			PriceMicros: a.PriceMicros, Currency: a.Currency, IdempotencyKey: fmt.Sprintf("conformance-pending-%d", time.Now().UnixNano())})
		k.seen(d, err)
		if err != nil {
			t.Fatalf("register %s: %v", c.Pending, err)
		}
		if d.Status != registrar.StatusPending {
			t.Errorf("register %s: status %q, want %q (the case gives it as kept pending by the registry)", c.Pending, d.Status, registrar.StatusPending)
		}
		d = k.follow(t, d)
		if d.Status != registrar.StatusActive {
			t.Errorf("%s ended %q, want %q", c.Pending, d.Status, registrar.StatusActive)
		}
		owned = append(owned, c.Pending)
	})

	t.Run("nameservers", func(t *testing.T) {
		if registered.Name == "" {
			t.Skip("nothing was registered")
		}
		d, err := rc.SetNameservers(ctx, registered.Name, c.Nameservers)
		k.seen(d, err)
		if err != nil {
			t.Fatalf("set nameservers of %s: %v", registered.Name, err)
		}
		if !sameHosts(d.Nameservers, c.Nameservers) {
			t.Errorf("set nameservers answered %v, want %v", d.Nameservers, c.Nameservers)
		}
		back := k.read(t, registered.Name)
		if !sameHosts(back.Nameservers, c.Nameservers) {
			t.Errorf("nameservers read back %v, want %v", back.Nameservers, c.Nameservers)
		}
	})

	t.Run("lock", func(t *testing.T) {
		if registered.Name == "" {
			t.Skip("nothing was registered")
		}
		for _, locked := range []bool{true, false, true} {
			d, err := rc.SetLock(ctx, registered.Name, locked)
			k.seen(d, err)
			if sdk.CodeOf(err) == sdk.CodeUnsupported {
				t.Logf("the driver sets no transfer lock (%v)", err)
				return
			}
			if err != nil {
				t.Fatalf("set lock %v on %s: %v", locked, registered.Name, err)
			}
			if d.Locked != locked {
				t.Errorf("set lock %v answered locked %v", locked, d.Locked)
			}
			if back := k.read(t, registered.Name); back.Locked != locked {
				t.Errorf("set lock %v read back locked %v", locked, back.Locked)
			}
		}
	})

	t.Run("auth_code", func(t *testing.T) {
		if registered.Name == "" {
			t.Skip("nothing was registered")
		}
		code, err := rc.AuthCode(ctx, registered.Name)
		if sdk.CodeOf(err) == sdk.CodeUnsupported {
			t.Logf("the driver hands out no auth codes (%v)", err)
			return
		}
		k.seen(nil, err)
		if err != nil {
			t.Fatalf("auth code of %s: %v", registered.Name, err)
		}
		if strings.TrimSpace(code) == "" {
			t.Errorf("the auth code of %s is empty", registered.Name)
		}
	})

	t.Run("transfer", func(t *testing.T) {
		if c.Transfer == "" {
			t.Log("the case gives no domain to transfer in")
			return
		}
		const wrong = "wrong-auth-code-0000"
		a, err := rc.Check(ctx, c.Transfer)
		k.seen(a, err)
		if err != nil {
			t.Fatalf("check %s: %v", c.Transfer, err)
		}
		_, err = rc.Transfer(ctx, registrar.TransferRequest{Domain: c.Transfer, AuthCode: wrong, OwnerContact: contactID,
			PriceMicros: a.TransferPriceMicros, Currency: a.Currency})
		if sdk.CodeOf(err) == sdk.CodeUnsupported {
			t.Logf("the driver does not transfer domains in (%v)", err)
			return
		}
		k.wantInvalid(t, "a transfer with a wrong auth code", err, "auth_code", wrong)
		d, err := rc.Transfer(ctx, registrar.TransferRequest{Domain: c.Transfer, AuthCode: c.TransferAuthCode, OwnerContact: contactID,
			PriceMicros: a.TransferPriceMicros, Currency: a.Currency, IdempotencyKey: fmt.Sprintf("conformance-transfer-%d", time.Now().UnixNano())})
		k.seen(d, err)
		if err != nil {
			t.Fatalf("transfer %s: %v", c.Transfer, err)
		}
		if c.TransferAuthCode != "" && len(c.TransferAuthCode) >= 6 {
			if b, _ := json.Marshal(d); strings.Contains(string(b), c.TransferAuthCode) {
				t.Errorf("the transfer's result carries the auth code")
			}
		}
		if d.Status != registrar.StatusPending && d.Status != registrar.StatusActive {
			t.Errorf("transfer %s: status %q, want %q or %q", c.Transfer, d.Status, registrar.StatusPending, registrar.StatusActive)
		}
		d = k.follow(t, d)
		if d.Status != registrar.StatusActive {
			t.Errorf("the transfer of %s ended %q, want %q", c.Transfer, d.Status, registrar.StatusActive)
		}
		owned = append(owned, c.Transfer)
	})

	t.Run("renew", func(t *testing.T) {
		name := c.Renew
		if name == "" {
			name = registered.Name
		}
		if name == "" {
			t.Skip("nothing to renew")
		}
		before := k.read(t, name)
		if before.Expires.IsZero() {
			t.Fatalf("%s has no expiry before renewal", name)
		}
		d, err := rc.Renew(ctx, name, 1)
		k.seen(d, err)
		if err != nil {
			t.Fatalf("renew %s: %v", name, err)
		}
		if !aboutYearsAfter(d.Expires, before.Expires, 1) {
			t.Errorf("renew %s for a year moved the expiry from %v to %v", name, before.Expires, d.Expires)
		}
		if c.Renew != "" {
			owned = append(owned, c.Renew)
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		all, err := rc.Snapshot(ctx)
		k.seen(all, err)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		for _, name := range owned {
			i := slices.IndexFunc(all, func(d registrar.Domain) bool { return d.Name == name })
			if i < 0 {
				t.Errorf("the snapshot lacks %s", name)
				continue
			}
			if all[i].Expires.IsZero() {
				t.Errorf("the snapshot gives %s no expiry: renewals are planned from it", name)
			}
		}
	})

	t.Run("no_secret_in_logs", func(t *testing.T) {
		p.Kill()
		text := logs.String()
		out := k.output()
		for i, s := range c.Secrets {
			if len(s) < 6 {
				continue
			}
			if strings.Contains(text, s) {
				t.Errorf("secret %d of the case appears in the plugin's logs", i)
			}
			if strings.Contains(out, s) {
				t.Errorf("secret %d of the case appears in an error or a result of the plugin", i)
			}
		}
	})
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

type registrarKit struct {
	rc            *registrar.Client
	followTimeout time.Duration
	followEvery   time.Duration

	mu  sync.Mutex
	out strings.Builder
}

// seen keeps what the plugin answered, for the secret check.
func (k *registrarKit) seen(v any, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v != nil {
		b, _ := json.Marshal(v)
		k.out.Write(b)
		k.out.WriteByte('\n')
	}
	if err != nil {
		k.out.WriteString(err.Error())
		k.out.WriteByte('\n')
	}
}

func (k *registrarKit) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

// wantInvalid fails unless err is sdk.CodeInvalid naming field and its text does not echo
// value.
func (k *registrarKit) wantInvalid(t *testing.T, what string, err error, field, value string) {
	t.Helper()
	k.seen(nil, err)
	if sdk.CodeOf(err) != sdk.CodeInvalid {
		t.Errorf("%s gave %v, want code %s naming %s", what, err, sdk.CodeInvalid, field)
		return
	}
	if sdk.FieldOf(err) != field {
		t.Errorf("%s names field %q, want %q", what, sdk.FieldOf(err), field)
	}
	if value != "" && strings.Contains(err.Error(), value) {
		t.Errorf("%s: the error echoes the value given (%q): name the field and say what is wrong instead", what, err.Error())
	}
}

// follow follows a pending domain until it ends.
func (k *registrarKit) follow(t *testing.T, d registrar.Domain) registrar.Domain {
	t.Helper()
	if d.Status != registrar.StatusPending {
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.followTimeout)
	defer cancel()
	got, err := registrar.Follow(ctx, k.rc, d.Name, k.followEvery)
	k.seen(got, err)
	if err != nil {
		t.Fatalf("follow pending %s: %v", d.Name, err)
	}
	return got
}

// read reads a domain back as the host would: DomainReader, else the snapshot.
func (k *registrarKit) read(t *testing.T, name string) registrar.Domain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := k.rc.Domain(ctx, name)
	k.seen(d, err)
	if sdk.CodeOf(err) == sdk.CodeUnsupported {
		all, err := k.rc.Snapshot(ctx)
		k.seen(all, err)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		i := slices.IndexFunc(all, func(d registrar.Domain) bool { return d.Name == name })
		if i < 0 {
			t.Fatalf("the snapshot lacks %s", name)
		}
		return all[i]
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return d
}

// aboutYearsAfter reports whether t is years after from, give or take two days (time
// zones, and registries that count from the end of the day).
func aboutYearsAfter(t, from time.Time, years int) bool {
	want := from.AddDate(years, 0, 0)
	d := t.Sub(want)
	return d > -48*time.Hour && d < 48*time.Hour
}

func sameHosts(a, b []string) bool {
	norm := func(x []string) []string {
		out := make([]string, len(x))
		for i, h := range x {
			out[i] = strings.TrimSuffix(strings.ToLower(h), ".")
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}
