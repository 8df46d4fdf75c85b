package main

import (
	"context"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
	"github.com/fedhost/fedhost/plugins/registrars/internal/wirevalue"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// customer is a customer (contact handle) as the API reads and writes it.
type customer struct {
	Handle      string `json:"handle,omitempty"`
	CompanyName string `json:"company_name"`
	Email       string `json:"email"`
	Name        struct {
		FirstName string `json:"first_name"`
		LastName  string `json:"last_name"`
	} `json:"name"`
	Phone struct {
		CountryCode      string `json:"country_code"`
		AreaCode         string `json:"area_code"`
		SubscriberNumber string `json:"subscriber_number"`
	} `json:"phone"`
	Address struct {
		Street  string `json:"street"`
		Number  string `json:"number"`
		Zipcode string `json:"zipcode"`
		City    string `json:"city"`
		Country string `json:"country"`
	} `json:"address"`
}

// houseNumber is a street's last word when it is a house number (12, 12a, 12-14).
var houseNumber = regexp.MustCompile(`^(.*\S)\s+([0-9][0-9A-Za-z/-]{0,9})$`)

func fromContact(c registrar.Contact) (customer, error) {
	var o customer
	n := strings.TrimSpace(c.Name)
	i := strings.LastIndexByte(n, ' ')
	if i <= 0 {
		return customer{}, sdk.Invalid("name", "give a first and a last name: Openprovider keeps them apart")
	}
	o.Name.FirstName, o.Name.LastName = strings.TrimSpace(n[:i]), n[i+1:]
	o.CompanyName, o.Email = c.Organization, c.Email
	p, err := reqcheck.Phone(c.Phone)
	if err != nil {
		return customer{}, err
	}
	o.Phone.CountryCode = "+" + strconv.Itoa(p.CountryCode)
	o.Phone.AreaCode, o.Phone.SubscriberNumber = p.AreaCode, p.National[len(p.AreaCode):]
	o.Address.Street = c.Street
	if m := houseNumber.FindStringSubmatch(c.Street); m != nil {
		o.Address.Street, o.Address.Number = m[1], m[2]
	}
	o.Address.Zipcode, o.Address.City, o.Address.Country = c.PostalCode, c.City, c.Country
	return o, nil
}

func (o customer) toContact() registrar.Contact {
	street := o.Address.Street
	if o.Address.Number != "" {
		street += " " + o.Address.Number
	}
	phone := strings.TrimPrefix(o.Phone.CountryCode, "+") + o.Phone.AreaCode + o.Phone.SubscriberNumber
	if strings.Trim(phone, "0123456789") != "" || len(phone) < 7 || len(phone) > 15 {
		phone = ""
	} else {
		phone = "+" + phone
	}
	return registrar.Contact{ID: reqcheck.Text(o.Handle, 64), Name: reqcheck.Text(o.Name.FirstName+" "+o.Name.LastName, 255),
		Organization: reqcheck.Text(o.CompanyName, 255), Email: reqcheck.Text(o.Email, 254), Phone: phone,
		Street: reqcheck.Text(street, 255), City: reqcheck.Text(o.Address.City, 255),
		PostalCode: reqcheck.Text(o.Address.Zipcode, 64), Country: reqcheck.Text(o.Address.Country, 2)}
}

// PutContact posts customers for a new contact and puts customers/{handle} for one
// with an id.
func (d *driver) PutContact(ctx context.Context, c registrar.Contact) (registrar.Contact, error) {
	if err := reqcheck.Contact(c.Name, c.Email, c.Phone, c.Street, c.City, c.PostalCode, c.Country); err != nil {
		return registrar.Contact{}, err
	}
	if len(c.Organization) > 255 {
		return registrar.Contact{}, sdk.Invalid("organization", "at most 255 characters")
	}
	o, err := fromContact(c)
	if err != nil {
		return registrar.Contact{}, err
	}
	a, _, err := d.client()
	if err != nil {
		return registrar.Contact{}, err
	}
	if c.ID == "" {
		var res struct {
			Handle string `json:"handle"`
		}
		if err := a.do(ctx, "POST", "customers", nil, o, &res, "contact"); err != nil {
			return registrar.Contact{}, err
		}
		if !handle.MatchString(res.Handle) {
			return registrar.Contact{}, sdk.Errorf(sdk.CodeInternal, "Openprovider POST customers answered without a handle")
		}
		c.ID = res.Handle
		return c, nil
	}
	h, err := contactHandle("id", c.ID)
	if err != nil {
		return registrar.Contact{}, err
	}
	if err := a.do(ctx, "PUT", "customers/"+url.PathEscape(h), nil, o, nil, "contact"); err != nil {
		return registrar.Contact{}, err
	}
	return c, nil
}

// GetContact reads customers/{handle}.
func (d *driver) GetContact(ctx context.Context, id string) (registrar.Contact, error) {
	h, err := contactHandle("id", id)
	if err != nil {
		return registrar.Contact{}, err
	}
	a, _, err := d.client()
	if err != nil {
		return registrar.Contact{}, err
	}
	var o customer
	if err := a.do(ctx, "GET", "customers/"+url.PathEscape(h), nil, nil, &o, "id"); err != nil {
		return registrar.Contact{}, err
	}
	return o.toContact(), nil
}

// ListContacts pages through GET customers.
func (d *driver) ListContacts(ctx context.Context) ([]registrar.Contact, error) {
	a, _, err := d.client()
	if err != nil {
		return nil, err
	}
	var out []registrar.Contact
	for page := range snapshotPages {
		var res struct {
			Results []customer       `json:"results"`
			Total   wirevalue.Number `json:"total"`
		}
		q := url.Values{"limit": {strconv.Itoa(snapshotPageSize)}, "offset": {strconv.Itoa(page * snapshotPageSize)}}
		if err := a.do(ctx, "GET", "customers", q, nil, &res, "contact"); err != nil {
			return nil, err
		}
		for _, o := range res.Results {
			out = append(out, o.toContact())
		}
		if len(res.Results) < snapshotPageSize || int64(len(out)) >= int64(res.Total) {
			return out, nil
		}
	}
	return nil, sdk.LimitExceeded("the Openprovider account holds more than %d customers", snapshotPages*snapshotPageSize)
}

// DeleteContact deletes customers/{handle}.
func (d *driver) DeleteContact(ctx context.Context, id string) error {
	h, err := contactHandle("id", id)
	if err != nil {
		return err
	}
	a, _, err := d.client()
	if err != nil {
		return err
	}
	return a.do(ctx, "DELETE", "customers/"+url.PathEscape(h), nil, nil, nil, "id")
}

var _ registrar.ContactManager = (*driver)(nil)
