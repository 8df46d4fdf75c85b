package main

import (
	"encoding/json"
	"testing"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit/appkittest"
	"github.com/fedhost/fedhost/sdk/conformance"
)

func TestMastodon(t *testing.T) {
	appkittest.Run(t, newMastodon(), appkittest.Case{
		Name:  "mastodon",
		OIDC:  map[string]any{"oidc_login": true, "oidc_only": true},
		Nodes: 3,
		Examples: []conformance.AppCase{{Name: "community", Domain: "social.example.net", Config: json.RawMessage(`{
			"site_title": "Example Social", "site_description": "A small instance for the neighbourhood",
			"contact_email": "mods@example.net", "registrations": "open", "default_locale": "fr-CA",
			"authorized_fetch": true, "admin_username": "alice", "admin_email": "alice@example.net", "mail_sender": "hello"}`)}},
		Wrong: map[string]map[string]any{
			"/registrations":    {"registrations": 5},
			"/single_user_mode": {"single_user_mode": "yes"},
			"/site_title":       {"site_title": ""},
			"/default_locale":   {"default_locale": "English"},
			"/oidc_login":       {"oidc_only": true},
			"/mail_sender":      {"mail_sender": "No Reply"},
		},
	})
}
