package appkit

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/sdk"
)

// Images are the OCI images of an app's nodes by role, pinned to the app version the
// plugin targets. A hosting provider may point a role at a mirror in the plugin's
// settings; the tag stays its responsibility then.
type Images map[string]string

// SettingsSchema is the JSON Schema of the plugin settings: an optional image per role.
func (im Images) SettingsSchema() json.RawMessage {
	roles := make([]string, 0, len(im))
	for r := range im {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	props := make([]string, len(roles))
	for i, r := range roles {
		props[i] = fmt.Sprintf(`%q: {"type": "string", "minLength": 1, "pattern": "^[^\\s]+$", "description": "OCI image for the %s nodes, default %s"}`, r, r, im[r])
	}
	return json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "images": {
      "type": "object",
      "description": "Images to run instead of the pinned upstream ones (a registry mirror, say).",
      "properties": {` + strings.Join(props, ", ") + `},
      "additionalProperties": false
    }
  },
  "additionalProperties": false
}`)
}

// Configure returns im with the settings' image overrides applied.
func (im Images) Configure(settings json.RawMessage) (Images, error) {
	var s struct {
		Images map[string]string `json:"images"`
	}
	if len(settings) > 0 {
		if err := json.Unmarshal(settings, &s); err != nil {
			return nil, sdk.Invalid("settings", "the settings are not a JSON object with images: %v", err)
		}
	}
	out := Images{}
	for r, img := range im {
		out[r] = img
	}
	for r, img := range s.Images {
		if _, ok := im[r]; !ok {
			return nil, sdk.Invalid("images/"+r, "unknown node role %q", r)
		}
		if strings.TrimSpace(img) == "" {
			return nil, sdk.Invalid("images/"+r, "the image is empty")
		}
		out[r] = img
	}
	return out, nil
}
