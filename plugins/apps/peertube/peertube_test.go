package main

import (
	"testing"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit/appkittest"
)

func TestPeerTube(t *testing.T) {
	appkittest.Run(t, newPeerTube(), appkittest.Case{
		Name:  "peertube",
		OIDC:  map[string]any{"oidc_login": true},
		Nodes: 1,
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
