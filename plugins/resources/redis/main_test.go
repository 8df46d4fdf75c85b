package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/contract"
)

func resultOf(p conformance.Provisioned) (contract.RedisResult, error) {
	var r contract.RedisResult
	if err := json.Unmarshal(p.Result, &r); err != nil {
		return r, fmt.Errorf("result of %s/%s: %w", p.Tenant, p.Instance, err)
	}
	return r, nil
}

// loginAs connects with the credentials of p's result, as an application would.
func loginAs(p conformance.Provisioned) (*redis.Client, contract.RedisResult, error) {
	r, err := resultOf(p)
	if err != nil {
		return nil, r, err
	}
	pw, ok := p.Secrets[r.Password.Secret]
	if !ok {
		return nil, r, fmt.Errorf("no secret %q for %s/%s", r.Password.Secret, p.Tenant, p.Instance)
	}
	return userClient(net.JoinHostPort(r.Host, strconv.Itoa(r.Port)), r.User, string(pw)), r, nil
}

func TestConformance(t *testing.T) {
	conformance.Resource(t, testServer.pluginBinary, conformance.ResourceCase{
		Type:         "redis",
		Settings:     settingsJSON(),
		Request:      json.RawMessage(`{}`),
		Invalid:      json.RawMessage(`{"database": 1}`),
		InvalidField: "request",
		Access: func(ctx context.Context, from, to conformance.Provisioned) error {
			c, _, err := loginAs(from)
			if err != nil {
				return err
			}
			defer c.Close()
			target, err := resultOf(to)
			if err != nil {
				return err
			}
			key := target.KeyPrefix + "access"
			if err := c.Set(ctx, key, from.Tenant, 0).Err(); err != nil {
				return fmt.Errorf("SET %s as %s: %w", key, from.Tenant, err)
			}
			got, err := c.Get(ctx, key).Result()
			if err != nil {
				return fmt.Errorf("GET %s as %s: %w", key, from.Tenant, err)
			}
			if got != from.Tenant {
				return fmt.Errorf("GET %s gave %q, want %q", key, got, from.Tenant)
			}
			return nil
		},
		Exists: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			admin := adminClient()
			defer admin.Close()
			err = admin.Do(ctx, "ACL", "GETUSER", r.User).Err()
			if errors.Is(err, redis.Nil) {
				return false, nil
			}
			return err == nil, err
		},
		Seed: func(ctx context.Context, p conformance.Provisioned) error {
			c, r, err := loginAs(p)
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Set(ctx, r.KeyPrefix+"seed", "kept", 0).Err()
		},
		DataKept: func(ctx context.Context, p conformance.Provisioned) (bool, error) {
			r, err := resultOf(p)
			if err != nil {
				return false, err
			}
			admin := adminClient()
			defer admin.Close()
			v, err := admin.Get(ctx, r.KeyPrefix+"seed").Result()
			if errors.Is(err, redis.Nil) {
				return false, nil
			}
			return v == "kept", err
		},
	})
}
