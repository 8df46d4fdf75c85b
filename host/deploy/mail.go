package deploy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fedhost/fedhost/sdk/contract"
)

// MailResource is the name of a deployment's mail account row: the smtp resource the
// engine provisions for the whole deployment (App "") when its environment has one. The
// host sends the directory's invitation and reset links through it; like the directory
// it is kept when no longer planned and goes only with the deployment.
const MailResource = "mail"

// mailSender is the local part of the account's From address.
const mailSender = "noreply"

// planMail is the deployment's mail account, From noreply@<domain>, or nil when the
// environment has no smtp provider.
func (e *Engine) planMail(ctx context.Context, domain string) (*step, error) {
	if !e.has(contract.SMTP) {
		return nil, nil
	}
	spec, _ := json.Marshal(contract.SMTPRequest{Sender: mailSender, Domain: domain})
	s := &step{Name: MailResource, Request: MailResource, Type: contract.SMTP, Spec: spec}
	var err error
	if s.client, s.Provider, err = e.route(contract.SMTP); err != nil {
		return nil, fmt.Errorf("the deployment's mail account: %w", err)
	}
	if err := s.client.Validate(ctx, s.Type, s.Spec); err != nil {
		return nil, fmt.Errorf("the deployment's mail account (smtp by %s): %w", s.Provider, err)
	}
	return s, nil
}

// Mail returns a deployment's mail account (its smtp result) and the value of its
// password; a nil account when the deployment has none, whose links are then shown.
func (e *Engine) Mail(ctx context.Context, deploymentID string) (*contract.SMTPResult, []byte, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return nil, nil, err
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, row := range rows {
		if row.Name != MailResource || row.App != "" || row.Type != contract.SMTP {
			continue
		}
		var res contract.SMTPResult
		if err := json.Unmarshal([]byte(row.Result), &res); err != nil {
			return nil, nil, fmt.Errorf("the mail account's result: %w", err)
		}
		if row.SecretInstance == "" || res.Password.Secret == "" {
			return nil, nil, fmt.Errorf("the mail account of deployment %s keeps no password: submit the deployment again", d.ID)
		}
		pw, err := e.reveal(ctx, d.Namespace, row.SecretInstance, res.Password.Secret)
		if err != nil {
			return nil, nil, err
		}
		return &res, pw, nil
	}
	return nil, nil, nil
}
