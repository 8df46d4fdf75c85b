// Package wirevalue reads the numbers, flags, prices and dates of registrar APIs, which
// spell each in more than one way (a number or a numeric string, 1 or true), the same
// way for every driver.
package wirevalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
)

// Price is a decimal amount read exactly, in millionths.
type Price int64

func (p *Price) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "null" || s == "" {
		*p = 0
		return nil
	}
	m, err := reqcheck.Micros(s)
	if err != nil {
		return fmt.Errorf("price: %w", err)
	}
	*p = Price(m)
	return nil
}

// Number is an integer sent as a number or a string.
type Number int64

func (n *Number) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return fmt.Errorf("not an integer")
		}
		v = int64(f)
	}
	*n = Number(v)
	return nil
}

// Flag is a boolean sent as true/false, 1/0 or their strings.
type Flag bool

func (f *Flag) UnmarshalJSON(b []byte) error {
	switch strings.ToLower(string(bytes.Trim(b, `"`))) {
	case "1", "true", "yes":
		*f = true
	case "0", "false", "no", "", "null":
		*f = false
	default:
		return fmt.Errorf("not a flag")
	}
	return nil
}

// Time is a date as RFC 3339, as "2006-01-02 15:04:05" (UTC), or as XML-RPC's
// dateTime.iso8601 writes it.
type Time time.Time

var timeLayouts = []string{time.RFC3339, "2006-01-02 15:04:05", "20060102T15:04:05", "2006-01-02T15:04:05", "2006-01-02"}

func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a date is not a string")
	}
	if s == "" {
		*t = Time{}
		return nil
	}
	for _, l := range timeLayouts {
		if v, err := time.Parse(l, s); err == nil {
			*t = Time(v.UTC())
			return nil
		}
	}
	return fmt.Errorf("not a date in a known layout")
}
