package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path"
	"regexp"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/fedhost/fedhost/sdk"
)

// machine is one machine of the settings, its host key parsed.
type machine struct {
	Name         string `json:"name"`
	Address      string `json:"address"`
	User         string `json:"user"`
	HostKey      string `json:"host_key"`
	ArtifactsDir string `json:"artifacts_dir"`
	WorkDir      string `json:"work_dir"`
	ListenHost   string `json:"listen_host"`

	key ssh.PublicKey
}

type settings struct {
	Machines       []*machine
	signer         ssh.Signer
	connectTimeout time.Duration
}

var machineName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func parseSettings(raw json.RawMessage) (settings, error) {
	var in struct {
		Machines              []*machine `json:"machines"`
		PrivateKeyFile        string     `json:"private_key_file"`
		ConnectTimeoutSeconds int        `json:"connect_timeout_seconds"`
	}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return settings{}, sdk.Invalid("settings", "settings are not an object of the settings schema: %v", err)
		}
	}
	if len(in.Machines) == 0 {
		return settings{}, sdk.Invalid("settings/machines", "no machines are given: name at least one machine nodes run on")
	}
	seen := map[string]bool{}
	for i, m := range in.Machines {
		field := fmt.Sprintf("settings/machines/%d", i)
		if m == nil || !machineName.MatchString(m.Name) {
			return settings{}, sdk.Invalid(field+"/name", "a machine's name is 1 to 63 of a-z, 0-9, '.', '_' and '-'")
		}
		if seen[m.Name] {
			return settings{}, sdk.Invalid(field+"/name", "machine %q is named twice", m.Name)
		}
		seen[m.Name] = true
		if _, _, err := net.SplitHostPort(m.Address); err != nil || len(m.Address) > 255 {
			return settings{}, sdk.Invalid(field+"/address", "machine %q: address is host:port of its SSH server", m.Name)
		}
		if m.User == "" || len(m.User) > 64 {
			return settings{}, sdk.Invalid(field+"/user", "machine %q: give the user nodes run as", m.Name)
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(m.HostKey))
		if err != nil {
			return settings{}, sdk.Invalid(field+"/host_key", "machine %q: host_key is not a public key in authorized_keys format (a line of the machine's /etc/ssh/ssh_host_ed25519_key.pub): %v", m.Name, err)
		}
		m.key = key
		for name, dir := range map[string]string{"artifacts_dir": m.ArtifactsDir, "work_dir": m.WorkDir} {
			if !path.IsAbs(dir) || path.Clean(dir) == "/" || len(dir) > 1024 {
				return settings{}, sdk.Invalid(field+"/"+name, "machine %q: %s is an absolute directory on the machine, not /", m.Name, name)
			}
		}
		m.ArtifactsDir, m.WorkDir = path.Clean(m.ArtifactsDir), path.Clean(m.WorkDir)
		if m.ListenHost == "" || len(m.ListenHost) > 255 {
			return settings{}, sdk.Invalid(field+"/listen_host", "machine %q: give the address nodes listen on and the host reaches them at", m.Name)
		}
	}
	if in.PrivateKeyFile == "" {
		return settings{}, sdk.Invalid("settings/private_key_file", "give the file on this machine that holds the SSH private key the driver logs in with")
	}
	pem, err := os.ReadFile(in.PrivateKeyFile)
	if err != nil {
		return settings{}, sdk.Invalid("settings/private_key_file", "the private key file cannot be read: %v", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		// The parser's error could quote the file; it is not shown.
		return settings{}, sdk.Invalid("settings/private_key_file", "the private key file holds no unencrypted SSH private key (OpenSSH or PEM format, no passphrase)")
	}
	t := in.ConnectTimeoutSeconds
	if t == 0 {
		t = 10
	}
	if t < 1 || t > 300 {
		return settings{}, sdk.Invalid("settings/connect_timeout_seconds", "connect_timeout_seconds is 1 to 300")
	}
	return settings{Machines: in.Machines, signer: signer, connectTimeout: time.Duration(t) * time.Second}, nil
}

// place picks the machine of tenant/instance: FNV-1a (32 bits) of "tenant/instance"
// modulo the number of machines. It is stable while the list of machines is unchanged.
func (s settings) place(tenant, instance string) *machine {
	h := fnv.New32a()
	h.Write([]byte(tenant + "/" + instance))
	return s.Machines[int(h.Sum32()%uint32(len(s.Machines)))]
}
