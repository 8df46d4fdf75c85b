package reqcheck

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestMicros(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"9.99": 9_990_000, "12": 12_000_000, "0.125": 125_000, "1.2345670": 1_234_567, "0": 0} {
		got, err := Micros(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1e3", "1.2.3", "1.0000001", ".5", "99999999999999999999", "NaN"} {
		_, err := Micros(in)
		require.Error(t, err, in)
	}
}

func TestFormatMicros(t *testing.T) {
	t.Parallel()
	for m, want := range map[int64]string{9_990_000: "9.99", 12_000_000: "12.00", 125_000: "0.125", 12_500_000: "12.50"} {
		require.Equal(t, want, FormatMicros(m))
	}
}

func TestDomainAndContact(t *testing.T) {
	t.Parallel()
	d, err := Domain("domain", "Acme.Test.")
	require.NoError(t, err)
	require.Equal(t, "acme.test", d)
	for _, bad := range []string{"", "test", "-a.test", "a..test", "a_b.test"} {
		_, err := Domain("domain", bad)
		require.Equal(t, "domain", sdk.FieldOf(err), bad)
	}
	ok := func() []string {
		return []string{"Ada Lovelace", "ada@example.com", "+4930123456", "Main St 1", "Berlin", "10115", "DE"}
	}
	require.NoError(t, Contact(ok()[0], ok()[1], ok()[2], ok()[3], ok()[4], ok()[5], ok()[6]))
	for field, i := range map[string]int{"email": 1, "phone": 2, "country": 6, "city": 4} {
		c := ok()
		c[i] = map[int]string{1: "Ada <ada@example.com>", 2: "030 123456", 6: "Germany", 4: ""}[i]
		err := Contact(c[0], c[1], c[2], c[3], c[4], c[5], c[6])
		require.Equal(t, field, sdk.FieldOf(err))
	}
	_, err = Nameservers("nameservers", []string{"ns1.example.net", "NS1.example.net"})
	require.Equal(t, "nameservers/1", sdk.FieldOf(err))
}

func TestPhone(t *testing.T) {
	t.Parallel()
	p, err := Phone("+4930123456")
	require.NoError(t, err)
	require.Equal(t, "+49.30123456", p.EPP())
	require.Equal(t, "30", p.AreaCode)
	require.Equal(t, "+4930123456", ParseEPPPhone(p.EPP()))
	for _, bad := range []string{"+49", "+999123456789", "004930123456", "+1 202 555 0100"} {
		_, err := Phone(bad)
		require.Equal(t, "phone", sdk.FieldOf(err), bad)
	}
	require.Empty(t, ParseEPPPhone("+49-30"))
}

func TestText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ab", Text("a\nb", 10))
	require.Equal(t, "é", Text("éé", 3), "a cut never splits a character")
}

func FuzzMicros(f *testing.F) {
	for _, s := range []string{"9.99", "0", "12.000001", "1.", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Micros(s)
		if err != nil {
			return
		}
		if m < 0 {
			t.Fatalf("negative price %d from %q", m, s)
		}
		back := strconv.FormatInt(m/1_000_000, 10)
		if _, err := Micros(back); err != nil {
			t.Fatalf("whole part %q of %q does not read back", back, s)
		}
	})
}
