package main

import (
	"encoding/json"
	"testing"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit/appkittest"
	"github.com/fedhost/fedhost/sdk/conformance"
)

func TestPeerTube(t *testing.T) {
	appkittest.Run(t, newPeerTube(), appkittest.Case{
		Name:  "peertube",
		OIDC:  map[string]any{"oidc_login": true},
		Nodes: 1,
		Examples: []conformance.AppCase{{Name: "school", Domain: "videos.example.net", Config: json.RawMessage(`{
			"instance_name": "School videos", "admin_email": "it@example.net", "signup": "approval", "signup_limit": 200,
			"video_quota_mb": 5120, "video_quota_daily_mb": 1024, "transcoding_threads": 4,
			"transcoding_resolutions": ["360p", "720p", "1080p"], "transcoding_web_videos": true, "import_http": true}`)}},
		Wrong: map[string]map[string]any{
			"/signup":                    {"signup": true},
			"/signup_limit":              {"signup_limit": "ten"},
			"/video_quota_mb":            {"video_quota_mb": -2},
			"/transcoding_resolutions/1": {"transcoding_resolutions": []string{"480p", "4k"}},
			"/transcoding_threads":       {"transcoding_threads": 1.5},
			"/transcoding_web_videos":    {"transcoding_hls": false},
		},
	})
}
