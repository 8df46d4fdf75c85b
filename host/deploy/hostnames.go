package deploy

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/fedhost/fedhost/host/store"
)

// HostNames is the full host name of each enabled app of d's stored configuration whose
// schema marks one (x-hostname), by app; none before a first submit. A deployment whose
// catalog revision has an app version no longer installed shows none rather than failing:
// its next submit names what to install. An engine without a catalog knows no schema.
func (e *Engine) HostNames(ctx context.Context, d store.Deployment) (map[string]string, error) {
	if d.Config == "" || e.opts.Catalog == nil {
		return nil, nil
	}
	cat, err := e.catalogAt(ctx, d.CatalogRevision)
	var refused *Error
	if errors.As(err, &refused) && refused.Code == CodeConflict {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hosts, _ := cat.HostNames(json.RawMessage(d.Config))
	if len(hosts) == 0 {
		return nil, nil
	}
	return hosts, nil
}
