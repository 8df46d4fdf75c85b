// Package reqcheck checks what the host asks a registrar driver for before any call
// reaches the registrar, so that bad input is refused naming its field and nothing is
// charged; and it reads the registrars' decimal prices exactly.
package reqcheck

import (
	"fmt"
	"math"
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"

	"github.com/fedhost/fedhost/sdk"
)

// label is one LDH label of a host name (RFC 1123), lower case.
var label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Domain returns name lower-cased, refusing (as field) anything that is not a
// registrable name of at least two labels.
func Domain(field, name string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	if n == "" {
		return "", sdk.Invalid(field, "give a domain name (example.com, say)")
	}
	if len(n) > 253 {
		return "", sdk.Invalid(field, "a domain name has at most 253 characters")
	}
	labels := strings.Split(n, ".")
	if len(labels) < 2 {
		return "", sdk.Invalid(field, "not a domain name of at least two labels (example.com, say)")
	}
	for _, l := range labels {
		if !label.MatchString(l) {
			return "", sdk.Invalid(field, "not a domain name: each label is letters, digits and inner hyphens, 1 to 63 of them (IDNs in their xn-- form)")
		}
	}
	return n, nil
}

// Nameservers checks a delegation: 1 to 13 distinct host names.
func Nameservers(field string, ns []string) ([]string, error) {
	if len(ns) == 0 {
		return nil, sdk.Invalid(field, "give at least one nameserver")
	}
	if len(ns) > 13 {
		return nil, sdk.Invalid(field, "give at most 13 nameservers")
	}
	out := make([]string, 0, len(ns))
	seen := map[string]bool{}
	for i, n := range ns {
		h, err := Domain(fmt.Sprintf("%s/%d", field, i), n)
		if err != nil {
			return nil, err
		}
		if seen[h] {
			return nil, sdk.Invalid(fmt.Sprintf("%s/%d", field, i), "this nameserver is listed twice")
		}
		seen[h] = true
		out = append(out, h)
	}
	return out, nil
}

// Years checks a registration or renewal period; 0 means 1.
func Years(field string, years int) (int, error) {
	if years == 0 {
		return 1, nil
	}
	if years < 1 || years > 10 {
		return 0, sdk.Invalid(field, "give from 1 to 10 years")
	}
	return years, nil
}

var (
	country = regexp.MustCompile(`^[A-Z]{2}$`)
	// e164 is +, a country code and at most 15 digits in all (ITU-T E.164).
	e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
)

// PhoneNumber is an E.164 number split as registrars want it: EPP's +CC.NNN, or the
// country calling code and the national number apart.
type PhoneNumber struct {
	CountryCode int
	National    string
	// AreaCode is the geographical area code National begins with, "" where the
	// numbering plan has none (mobile numbers, say).
	AreaCode string
}

// EPP writes the number as RFC 5733 does: +49.30123456.
func (p PhoneNumber) EPP() string { return fmt.Sprintf("+%d.%s", p.CountryCode, p.National) }

// Phone checks an E.164 number (+4930123456) against the numbering plans
// (libphonenumber's metadata) and splits off its country calling code.
func Phone(phone string) (PhoneNumber, error) {
	bad := sdk.Invalid("phone", "give a valid number in E.164 form: +, country code, number, digits only (+4930123456)")
	if !e164.MatchString(phone) {
		return PhoneNumber{}, bad
	}
	n, err := phonenumbers.Parse(phone, "")
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return PhoneNumber{}, bad
	}
	national := phonenumbers.GetNationalSignificantNumber(n)
	area := min(max(phonenumbers.GetLengthOfGeographicalAreaCode(n), 0), len(national))
	return PhoneNumber{CountryCode: int(n.GetCountryCode()), National: national, AreaCode: national[:area]}, nil
}

// ParseEPPPhone reads +CC.NNN back as E.164; "" for anything else.
func ParseEPPPhone(s string) string {
	cc, nat, ok := strings.Cut(strings.TrimPrefix(s, "+"), ".")
	if !ok || !strings.HasPrefix(s, "+") || cc == "" || strings.Trim(cc+nat, "0123456789") != "" || !e164.MatchString("+"+cc+nat) {
		return ""
	}
	return "+" + cc + nat
}

// Contact checks what every registrar needs of a contact; fields are named as the
// contract's Contact fields (name, phone, country and so on).
func Contact(name, email, phone, street, city, postalCode, countryCode string) error {
	for _, f := range []struct{ field, v string }{
		{"name", name}, {"street", street}, {"city", city}, {"postal_code", postalCode},
	} {
		if strings.TrimSpace(f.v) == "" {
			return sdk.Invalid(f.field, "give this part of the contact")
		}
		if len(f.v) > 255 {
			return sdk.Invalid(f.field, "at most 255 characters")
		}
		if strings.ContainsFunc(f.v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return sdk.Invalid(f.field, "no control characters or line breaks")
		}
	}
	if !country.MatchString(countryCode) {
		return sdk.Invalid("country", "give an ISO 3166-1 alpha-2 code in capitals (DE, NL, US)")
	}
	if _, err := Phone(phone); err != nil {
		return err
	}
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email || len(email) > 254 {
		return sdk.Invalid("email", "give a bare e-mail address (hostmaster@example.com)")
	}
	return nil
}

// Micros reads a non-negative decimal price ("9.99", "12", "0.125") as millionths,
// exactly: registrars quote prices as decimals and a float would round them.
func Micros(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 32 {
		return 0, fmt.Errorf("not a price")
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return 0, fmt.Errorf("not a decimal price")
	}
	if len(frac) > 6 {
		if strings.Trim(frac[6:], "0") != "" {
			return 0, fmt.Errorf("a price with more than six decimals")
		}
		frac = frac[:6]
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1_000_000-1 {
		return 0, fmt.Errorf("a price too large")
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*1_000_000 + f, nil
}

// FormatMicros writes millionths as a decimal price (9990000 as 9.99).
func FormatMicros(m int64) string {
	s := fmt.Sprintf("%d.%06d", m/1_000_000, m%1_000_000)
	s = strings.TrimRight(s, "0")
	if strings.HasSuffix(s, ".") {
		s += "00"
	} else if i := strings.IndexByte(s, '.'); len(s)-i == 2 {
		s += "0"
	}
	return s
}

// Text bounds a string that came from a registrar before it is stored or shown: at most
// n bytes, control characters dropped.
func Text(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
