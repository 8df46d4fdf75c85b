package wirevalue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSpellings(t *testing.T) {
	t.Parallel()
	var v struct {
		P Price  `json:"p"`
		N Number `json:"n"`
		F Flag   `json:"f"`
		T Time   `json:"t"`
	}
	for _, raw := range []string{
		`{"p":9.99,"n":7,"f":1,"t":"2027-12-02T10:00:00Z"}`,
		`{"p":"9.99","n":"7","f":"true","t":"2027-12-02 10:00:00"}`,
		`{"p":9.990,"n":7.0,"f":true,"t":"20271202T10:00:00"}`,
	} {
		require.NoError(t, json.Unmarshal([]byte(raw), &v), raw)
		require.Equal(t, Price(9_990_000), v.P, raw)
		require.Equal(t, Number(7), v.N, raw)
		require.True(t, bool(v.F), raw)
		require.Equal(t, time.Date(2027, 12, 2, 10, 0, 0, 0, time.UTC), time.Time(v.T), raw)
	}
	for _, raw := range []string{`{"p":-1}`, `{"n":1.5}`, `{"f":"maybe"}`, `{"t":"next week"}`, `{"t":5}`} {
		require.Error(t, json.Unmarshal([]byte(raw), &v), raw)
	}
}
