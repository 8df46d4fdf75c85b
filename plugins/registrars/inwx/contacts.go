package main

import (
	"context"
	"strconv"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
	"github.com/fedhost/fedhost/plugins/registrars/internal/wirevalue"
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// contact is a contact as contact.info and contact.list give it.
type contact struct {
	ID     wirevalue.Number `json:"id"`
	Type   string           `json:"type"`
	Name   string           `json:"name"`
	Org    string           `json:"org"`
	Street string           `json:"street"`
	City   string           `json:"city"`
	PC     string           `json:"pc"`
	CC     string           `json:"cc"`
	Voice  string           `json:"voice"`
	Email  string           `json:"email"`
}

func (c contact) toContact() registrar.Contact {
	return registrar.Contact{ID: strconv.FormatInt(int64(c.ID), 10), Name: reqcheck.Text(c.Name, 255),
		Organization: reqcheck.Text(c.Org, 255), Email: reqcheck.Text(c.Email, 254),
		Phone: reqcheck.ParseEPPPhone(c.Voice), Street: reqcheck.Text(c.Street, 255),
		City: reqcheck.Text(c.City, 255), PostalCode: reqcheck.Text(c.PC, 64), Country: reqcheck.Text(c.CC, 2)}
}

// PutContact calls contact.create for a new contact and contact.update for one with an id.
func (d *driver) PutContact(ctx context.Context, c registrar.Contact) (registrar.Contact, error) {
	if err := reqcheck.Contact(c.Name, c.Email, c.Phone, c.Street, c.City, c.PostalCode, c.Country); err != nil {
		return registrar.Contact{}, err
	}
	if len(c.Organization) > 255 {
		return registrar.Contact{}, sdk.Invalid("organization", "at most 255 characters")
	}
	phone, _ := reqcheck.Phone(c.Phone) // checked above
	params := map[string]any{"name": c.Name, "street": c.Street, "city": c.City, "pc": c.PostalCode,
		"cc": c.Country, "voice": phone.EPP(), "email": c.Email}
	if c.Organization != "" {
		params["org"] = c.Organization
	}
	rpc, _, err := d.client()
	if err != nil {
		return registrar.Contact{}, err
	}
	if c.ID == "" {
		params["type"] = "PERSON"
		if c.Organization != "" {
			params["type"] = "ORG"
		}
		var res struct {
			ID wirevalue.Number `json:"id"`
		}
		if _, err := rpc.call(ctx, "contact.create", params, &res, "contact"); err != nil {
			return registrar.Contact{}, err
		}
		if res.ID <= 0 {
			return registrar.Contact{}, sdk.Errorf(sdk.CodeInternal, "INWX contact.create gave no contact id")
		}
		c.ID = strconv.FormatInt(int64(res.ID), 10)
		return c, nil
	}
	id, err := contactID("id", c.ID)
	if err != nil {
		return registrar.Contact{}, err
	}
	params["id"] = id
	if _, err := rpc.call(ctx, "contact.update", params, nil, "contact"); err != nil {
		return registrar.Contact{}, err
	}
	return c, nil
}

// GetContact calls contact.info.
func (d *driver) GetContact(ctx context.Context, id string) (registrar.Contact, error) {
	n, err := contactID("id", id)
	if err != nil {
		return registrar.Contact{}, err
	}
	rpc, _, err := d.client()
	if err != nil {
		return registrar.Contact{}, err
	}
	var res struct {
		Contact contact `json:"contact"`
	}
	if _, err := rpc.call(ctx, "contact.info", map[string]any{"id": n}, &res, "id"); err != nil {
		return registrar.Contact{}, err
	}
	return res.Contact.toContact(), nil
}

// ListContacts pages through contact.list.
func (d *driver) ListContacts(ctx context.Context) ([]registrar.Contact, error) {
	rpc, _, err := d.client()
	if err != nil {
		return nil, err
	}
	var out []registrar.Contact
	for page := 1; page <= snapshotPages; page++ {
		var res struct {
			Count   wirevalue.Number `json:"count"`
			Contact []contact        `json:"contact"`
		}
		if _, err := rpc.call(ctx, "contact.list", map[string]any{"page": page, "pagelimit": snapshotPageSize}, &res, "contact"); err != nil {
			return nil, err
		}
		for _, c := range res.Contact {
			out = append(out, c.toContact())
		}
		if len(res.Contact) < snapshotPageSize || int64(len(out)) >= int64(res.Count) {
			return out, nil
		}
	}
	return nil, sdk.LimitExceeded("the INWX account holds more than %d contacts", snapshotPages*snapshotPageSize)
}

// DeleteContact calls contact.delete.
func (d *driver) DeleteContact(ctx context.Context, id string) error {
	n, err := contactID("id", id)
	if err != nil {
		return err
	}
	rpc, _, err := d.client()
	if err != nil {
		return err
	}
	_, err = rpc.call(ctx, "contact.delete", map[string]any{"id": n}, nil, "id")
	return err
}

var _ registrar.ContactManager = (*driver)(nil)
