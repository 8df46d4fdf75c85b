// Package hostname checks the names a tls request asks a certificate for, the same way
// in every tls provider.
package hostname

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// MaxDomains bounds a request's names, as public CAs do (Let's Encrypt: 100).
const MaxDomains = 100

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Check says why d is not a DNS name a certificate may carry: lower case, labels of at
// most 63 characters, at most 253 in all, not an IP address, a wildcard only as the
// whole leftmost label over at least two more. The error never repeats the name.
func Check(d string) error {
	if len(d) > 253 {
		return fmt.Errorf("the name has %d characters; a DNS name has at most 253", len(d))
	}
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return errors.New("an IP address, not a DNS name: this provider issues certificates for host names only")
	}
	if d != strings.ToLower(d) {
		return errors.New("write the name in lower case")
	}
	labels := strings.Split(d, ".")
	if labels[0] == "*" {
		if len(labels) < 3 {
			return errors.New("a wildcard needs at least two labels under it (*.acme.example)")
		}
		labels = labels[1:]
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return errors.New("not a DNS name: labels of letters, digits and inner dashes, 1 to 63 characters, separated by single dots; a wildcard only as the whole first label")
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return errors.New("the last label is all digits, which no top-level domain is: an IP address is not a DNS name")
	}
	return nil
}
