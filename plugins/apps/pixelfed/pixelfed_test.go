package main

import (
	"encoding/json"
	"testing"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit/appkittest"
	"github.com/fedhost/fedhost/sdk/conformance"
)

func TestPixelfed(t *testing.T) {
	appkittest.Run(t, newPixelfed(), appkittest.Case{
		Name:  "pixelfed",
		OIDC:  map[string]any{"oidc_login": true},
		Nodes: 2,
		Examples: []conformance.AppCase{{Name: "photo-club", Domain: "photos.example.net", Config: json.RawMessage(`{
			"app_name": "Photo club", "contact_email": "club@example.net", "registrations": "closed",
			"max_users": 50, "default_language": "de", "max_photo_size_kb": 30000, "max_album_length": 10,
			"image_quality": 90, "federation": false, "admin_username": "club_admin", "admin_email": "club@example.net"}`)}},
		Wrong: map[string]map[string]any{
			"/registrations":     {"registrations": "maybe"},
			"/max_photo_size_kb": {"max_photo_size_kb": 0},
			"/image_quality":     {"image_quality": "high"},
			"/federation":        {"federation": 1},
			"/admin_email":       {"admin_email": "not an address"},
		},
	})
}
