// Command fedhost-resource-acme is the tls resource from an ACME certificate authority
// (RFC 8555: Let's Encrypt, a private step-ca, pebble in tests), through lego v5. It
// answers DNS-01 challenges with RFC 2136 updates to the deployment's own zone, signed
// with the zone's TSIG key from the request, or HTTP-01 challenges on a listener of its own.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	resource.Serve(sdk.Description{
		Name:           "acme",
		Version:        "0.1.0",
		Summary:        "Certificates from an ACME certificate authority (RFC 8555), validated by DNS-01 through the deployment's zone or by HTTP-01",
		Serves:         []string{"tls"},
		SettingsSchema: settingsSchema,
	}, newProvider())
}
