package main

import (
	"testing"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit/appkittest"
)

func TestPixelfed(t *testing.T) {
	appkittest.Run(t, newPixelfed(), appkittest.Case{
		Name:  "pixelfed",
		OIDC:  map[string]any{"oidc_login": true},
		Nodes: 2,
		Wrong: map[string]map[string]any{
			"/registrations":     {"registrations": "maybe"},
			"/max_photo_size_kb": {"max_photo_size_kb": 0},
			"/image_quality":     {"image_quality": "high"},
			"/federation":        {"federation": 1},
			"/admin_email":       {"admin_email": "not an address"},
		},
	})
}
