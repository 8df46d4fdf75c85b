package cli

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// localCARoot is where the localca provider keeps its root in its data directory
// (plugins/resources/localca: rootFileName).
const localCARoot = "ca.pem"

func (e *env) caCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "The host's local certificate authority (the localca tls provider)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "root",
		Short: "Print the local CA's root certificate (PEM), for a person to trust it",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return e.caRoot() },
	})
	return cmd
}

func (e *env) caRoot() error {
	cfg, err := e.load()
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.DataDir, "plugins", "localca", localCARoot)
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no local CA in %s: start fedhost with the localca provider first (a tls resource with provider \"localca\"); it makes the CA at its first start", filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("reading the local CA's root: %w", err)
	}
	b, _ := pem.Decode(text)
	if b == nil || b.Type != "CERTIFICATE" {
		return fmt.Errorf("%s is not a PEM certificate: restore it from a backup, or remove it to have the localca provider make a new root for its key at its next start", path)
	}
	root, err := x509.ParseCertificate(b.Bytes)
	if err != nil || !root.IsCA {
		return fmt.Errorf("%s is not a CA certificate: restore it from a backup, or remove it to have the localca provider make a new root for its key at its next start", path)
	}
	_, err = e.stdout.Write(pem.EncodeToMemory(b))
	return err
}
