package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-acme/lego/v5/acme"

	"github.com/fedhost/fedhost/sdk"
)

const maxDetail = 300

// challengePathRE matches the token in an HTTP-01 URL (RFC 8555 8.3).
var challengePathRE = regexp.MustCompile(`acme-challenge/[A-Za-z0-9_-]+`)

// tokenRE matches what may be a token, a key authorization or a key in a message from
// the CA or lego: a long run of base64 characters.
var tokenRE = regexp.MustCompile(`[A-Za-z0-9_+/=-]{24,}`)

// scrub makes text from the CA or lego fit for an error a person sees: no run that may
// be a token or key, one line, bounded.
func scrub(text string) string {
	text = challengePathRE.ReplaceAllString(text, "acme-challenge/[token]")
	text = tokenRE.ReplaceAllString(text, "[redacted]")
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > maxDetail {
		text = text[:maxDetail] + "…"
	}
	return text
}

// problem returns the first ACME problem document (RFC 8555 6.7) in err's chain.
func problem(err error) *acme.ProblemDetails {
	var pd *acme.ProblemDetails
	if errors.As(err, &pd) {
		return pd
	}
	return nil
}

// Problem types that say the CA is busy or down, not that the request is wrong.
var unavailableTypes = map[string]bool{
	acme.ServerInternalErrorType: true,
	acme.RateLimitedErrorType:    true,
	acme.BadNonceErrorType:       true,
}

// caError turns an error of lego into one a person can act on: it names the domain it
// concerns (field/i) and the ACME problem type, or, for a failure before the CA
// answered (the DNS update refused, the listener not started), what failed.
func caError(err error, doing string, domains []string, field string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return sdk.Unavailable("%s did not finish within timeout_seconds: the CA or the DNS did not answer in time; provision again, or raise timeout_seconds", doing)
	}
	text := err.Error()
	name, at := "", field
	for i, d := range domains {
		// lego reports failures by domain as "[domain: cause]".
		if strings.Contains(text, "["+d+": ") || strings.Contains(text, "["+d+"] ") {
			name, at = d, fmt.Sprintf("%s/%d", field, i)
			break
		}
	}
	pd := problem(err)
	if pd != nil && name == "" {
		for i, d := range domains {
			if strings.Contains(pd.Detail, d) {
				name, at = d, fmt.Sprintf("%s/%d", field, i)
				break
			}
		}
	}
	about := ""
	if name != "" {
		about = " for " + name
	}
	if pd != nil {
		msg := fmt.Sprintf("%s%s: the CA answered %s: %s", doing, about, pd.Type, scrub(pd.Detail))
		if unavailableTypes[pd.Type] {
			return sdk.Unavailable("%s; provision again later", msg)
		}
		return sdk.Invalid(at, "%s", msg)
	}
	if strings.Contains(text, "dnsupdate:") {
		return sdk.Invalid("request/dns", "%s%s: the DNS update of the challenge answer failed (%s): check that dns is the update key of the zone of this name", doing, about, scrub(cause(text, name)))
	}
	return sdk.Unavailable("%s%s: %s", doing, about, scrub(cause(text, name)))
}

// cause is lego's message for domain (what follows "[domain: "), or all of text.
func cause(text, domain string) string {
	if domain == "" {
		return text
	}
	if _, after, ok := strings.Cut(text, "["+domain+": "); ok {
		if i := strings.LastIndex(after, "]"); i >= 0 {
			return after[:i]
		}
		return after
	}
	return text
}
