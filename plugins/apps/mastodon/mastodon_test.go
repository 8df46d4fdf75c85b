package main

import (
	"testing"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit/appkittest"
)

func TestMastodon(t *testing.T) {
	appkittest.Run(t, newMastodon(), appkittest.Case{
		Name:  "mastodon",
		OIDC:  map[string]any{"oidc_login": true, "oidc_only": true},
		Nodes: 3,
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
