package registrar

import (
	"context"
	"fmt"
	"time"

	"github.com/fedhost/fedhost/sdk"
)

// Follow reads domain every interval until its status is no longer StatusPending, and
// returns it as it is then (StatusActive, StatusFailed or another word of the
// registrar). It reads with the driver's DomainReader and, where the driver does not
// offer one (sdk.CodeUnsupported, as a protocol-v1 plugin answers), with Snapshot, where
// a domain not listed yet counts as still pending. It stops with ctx's error.
func Follow(ctx context.Context, r Registrar, domain string, interval time.Duration) (Domain, error) {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	reader, useReader := r.(DomainReader)
	for {
		var d Domain
		var err error
		if useReader {
			d, err = reader.Domain(ctx, domain)
			if sdk.CodeOf(err) == sdk.CodeUnsupported {
				useReader = false
				continue
			}
		} else {
			d, err = fromSnapshot(ctx, r, domain)
		}
		if err != nil {
			return Domain{}, err
		}
		if d.Status != StatusPending {
			return d, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return d, fmt.Errorf("domain %s is still pending: %w", domain, ctx.Err())
		case <-t.C:
		}
	}
}

func fromSnapshot(ctx context.Context, r Registrar, domain string) (Domain, error) {
	all, err := r.Snapshot(ctx)
	if err != nil {
		return Domain{}, err
	}
	for _, d := range all {
		if d.Name == domain {
			return d, nil
		}
	}
	return Domain{Name: domain, Status: StatusPending}, nil
}
