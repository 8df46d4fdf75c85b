// Command fedhost-resource-openldap gives each deployment a subtree of a shared OpenLDAP
// directory, with users and groups under it and a bind account that the directory's
// access rules limit to that subtree.
package main

import (
	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

func main() {
	p := &provider{}
	resource.Serve(sdk.Description{
		Name:           "openldap",
		Version:        "0.1.0",
		Summary:        "A directory subtree and a bind account per deployment on a shared OpenLDAP server",
		Serves:         []string{"ldap"},
		SettingsSchema: settingsSchema,
	}, p)
	p.close()
}
