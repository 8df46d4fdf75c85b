package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/plugins/registrars/internal/reqcheck"
)

// DomRobot's JSON-RPC answers carry numbers, flags and dates in more than one spelling
// (a number or a numeric string, 1 or true); these types read each the same way.

// price is a decimal amount read exactly, in millionths.
type price int64

func (p *price) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "null" || s == "" {
		*p = 0
		return nil
	}
	m, err := reqcheck.Micros(s)
	if err != nil {
		return fmt.Errorf("price: %w", err)
	}
	*p = price(m)
	return nil
}

// number is an integer sent as a number or a string.
type number int64

func (n *number) UnmarshalJSON(b []byte) error {
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
	*n = number(v)
	return nil
}

// flag is a boolean sent as true/false, 1/0 or their strings.
type flag bool

func (f *flag) UnmarshalJSON(b []byte) error {
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

// timestamp is a date as JSON-RPC writes it (RFC 3339 or "2006-01-02 15:04:05") or as
// XML-RPC's dateTime.iso8601 does.
type timestamp time.Time

var timeLayouts = []string{time.RFC3339, "2006-01-02 15:04:05", "20060102T15:04:05", "2006-01-02T15:04:05", "2006-01-02"}

func (t *timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a date is not a string")
	}
	if s == "" {
		*t = timestamp{}
		return nil
	}
	for _, l := range timeLayouts {
		if v, err := time.Parse(l, s); err == nil {
			*t = timestamp(v.UTC())
			return nil
		}
	}
	return fmt.Errorf("not a date DomRobot writes")
}
