package appkit

import (
	"encoding/json"

	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

// RequestsFunc gives the resources an app's decoded configuration C asks for on domain.
type RequestsFunc[C any] func(c C, domain string) []app.ResourceRequest

// Decode checks the domain and decodes an app's options into a C, with the schema's
// defaults filled in.
func Decode[C any](o *Options, domain string, raw json.RawMessage) (C, error) {
	var c C
	if err := CheckDomain(domain); err != nil {
		return c, err
	}
	return c, o.Decode(raw, &c)
}

// Requests answers an app's Requests call: the configuration decoded, then requests.
func Requests[C any](req app.RequestsRequest, o *Options, requests RequestsFunc[C]) ([]app.ResourceRequest, error) {
	c, err := Decode[C](o, req.Domain, req.Config)
	if err != nil {
		return nil, err
	}
	return requests(c, req.Domain), nil
}

// Prepared is what an app's Render starts from: its configuration, the results of what
// it requested, checked against the requests, and the common ones decoded.
type Prepared[C any] struct {
	Config  C
	Results *Results
	Common
}

// Prepare decodes a Render call's configuration, checks that the results answer the
// requests it makes, and decodes the common results (secrets, db, cache, media, mail).
func Prepare[C any](req app.RenderRequest, o *Options, requests RequestsFunc[C]) (Prepared[C], error) {
	c, err := Decode[C](o, req.Domain, req.Config)
	if err != nil {
		return Prepared[C]{}, err
	}
	res, err := CheckResults(requests(c, req.Domain), req.Results)
	if err != nil {
		return Prepared[C]{}, err
	}
	common, err := DecodeCommon(res)
	if err != nil {
		return Prepared[C]{}, err
	}
	return Prepared[C]{Config: c, Results: res, Common: common}, nil
}

// RequireFiles fails, naming the first missing one, unless the secrets result has each
// of files.
func RequireFiles(secrets contract.SecretResult, files ...string) error {
	for _, f := range files {
		if secrets.Files[f].Ref == "" {
			return InvalidResult("secrets", "has no file "+f)
		}
	}
	return nil
}
