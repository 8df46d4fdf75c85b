package deploy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fedhost/fedhost/sdk/contract"
)

// DirectoryResource is the name of a deployment's directory row: the ldap resource the
// engine provisions for the whole deployment (App "") when its environment has one.
const DirectoryResource = "directory"

// Directory returns a deployment's directory (its ldap result) and the value of its bind
// password, for the host's user management; a not_found Error when the deployment has
// no directory.
func (e *Engine) Directory(ctx context.Context, deploymentID string) (contract.LDAPResult, []byte, error) {
	d, err := e.Deployment(ctx, deploymentID)
	if err != nil {
		return contract.LDAPResult{}, nil, err
	}
	rows, err := e.opts.Store.Resources(ctx, d.ID)
	if err != nil {
		return contract.LDAPResult{}, nil, err
	}
	for _, row := range rows {
		if row.Name != DirectoryResource || row.App != "" || row.Type != contract.LDAP {
			continue
		}
		var res contract.LDAPResult
		if err := json.Unmarshal([]byte(row.Result), &res); err != nil {
			return contract.LDAPResult{}, nil, fmt.Errorf("the directory's result: %w", err)
		}
		if row.SecretInstance == "" || res.BindPassword.Secret == "" {
			return contract.LDAPResult{}, nil, fmt.Errorf("the directory of deployment %s keeps no bind password: submit the deployment again", d.ID)
		}
		pw, err := e.reveal(ctx, d.Namespace, row.SecretInstance, res.BindPassword.Secret)
		if err != nil {
			return contract.LDAPResult{}, nil, err
		}
		return res, pw, nil
	}
	return contract.LDAPResult{}, nil, refuse(CodeNotFound, "", "this deployment has no directory of users yet: the hosting provider's environment needs an ldap provider, and the deployment a build since")
}
