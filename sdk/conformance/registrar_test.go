package conformance_test

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedhost/fedhost/sdk/conformance"
	"github.com/fedhost/fedhost/sdk/registrar"
)

// A driver that offers every ability passes every check, the optional ones included.
func TestRegistrarPassesASoundDriver(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fedhost-registrar-memory")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/registrar").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conformance.Registrar(t, bin, conformance.RegistrarCase{
		Available:        "fresh.test",
		Taken:            "taken.test",
		Pending:          "slow.test",
		Renew:            "old.test",
		Transfer:         "incoming.test",
		TransferAuthCode: "In-Code-42",
		Secrets:          []string{"In-Code-42"},
		Nameservers:      []string{"ns1.provider.example", "ns2.provider.example"},
		Contact: registrar.Contact{Name: "Ada Operator", Organization: "Acme", Email: "ada@example.org", Phone: "+4930123456",
			Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"},
		FollowInterval: 200 * time.Millisecond,
	})
}
