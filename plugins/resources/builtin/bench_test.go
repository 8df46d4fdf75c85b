package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// benchSetup is one deployment with a user, behind a front door, on the plugin binary.
func benchSetup(b *testing.B) (*frontDoor, registered, string, *cpuMeter) {
	tenant := tenantName("bench")
	d := newTestDirectory(b, tenant)
	b.Cleanup(func() { d.remove(b) })
	pw := "alice-" + oauth2.GenerateVerifier()
	d.addUser(b, "alice", pw)
	d.addGroup(b, "app-users", "alice")
	f := newFrontDoor(b)
	pl := startPlugin(b, b.TempDir(), `{}`)
	return f, pl.provision(b, f, tenant, "app", d, []string{"app-users"}, nil), pw, &cpuMeter{plugin: pl.p.Pid(), slapd: slapdPids(b)}
}

// cpuMeter sums the CPU time of this process (client and front door), the plugin and
// slapd, so that a figure per operation can be given on a machine that other work shares.
type cpuMeter struct {
	plugin int
	slapd  []int
	start  [3]time.Duration
}

// times are the CPU times of the plugin, slapd and this process.
func (m *cpuMeter) times(b *testing.B) [3]time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	var out [3]time.Duration
	out[0] = procCPU(b, m.plugin)
	for _, pid := range m.slapd {
		out[1] += procCPU(b, pid)
	}
	out[2] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return out
}

func procCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis; utime and stime are the 12th and
	// 13th of them, in clock ticks of 10ms.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return time.Duration(u+s) * 10 * time.Millisecond
}

func (m *cpuMeter) begin(b *testing.B) { m.start = m.times(b) }

// report gives the CPU milliseconds per operation of each process and of all three, and
// the rate two cores of their own would reach at that cost.
func (m *cpuMeter) report(b *testing.B, unit string) {
	end := m.times(b)
	var total float64
	for i, name := range []string{"plugin", "slapd", "client"} {
		ms := (end[i] - m.start[i]).Seconds() * 1000 / float64(b.N)
		total += ms
		b.ReportMetric(ms, name+"-cpu-ms/"+unit)
	}
	b.ReportMetric(total, "cpu-ms/"+unit)
	b.ReportMetric(2000/total, unit+"s/s-on-2-cores")
}

// slapdPids are the slapd processes serving the test server's directory.
func slapdPids(b *testing.B) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmd, []byte("slapd")) && bytes.Contains(cmd, []byte(testServer.Dir)) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		b.Fatal("the test slapd's process is not found")
	}
	return pids
}

// BenchmarkFullLogin is the whole code flow per operation, as a browser and an app do it
// through the TLS front door: authorize, the log-in page, the form (an LDAP search and a
// bind as the user), the callback, the code exchange with PKCE and the ID token's check.
func BenchmarkFullLogin(b *testing.B) {
	f, reg, pw, cpu := benchSetup(b)
	var mu sync.Mutex
	// The flow waits on the network and the directory much of the time: more sign-ins
	// than cores run at once, as browsers would.
	b.SetParallelism(8)
	b.ResetTimer()
	cpu.begin(b)
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		r := newRP(b, f, reg)
		mu.Unlock()
		for pb.Next() {
			r.signIn(b, "alice", pw)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "logins/s")
	cpu.report(b, "login")
}

// BenchmarkTokenEndpoint is the token endpoint alone: a refresh grant per operation
// (client authentication, the user read again from the directory, new tokens, the
// refresh token rotated).
func BenchmarkTokenEndpoint(b *testing.B) {
	f, reg, pw, cpu := benchSetup(b)
	var mu sync.Mutex
	// The flow waits on the network and the directory much of the time: more sign-ins
	// than cores run at once, as browsers would.
	b.SetParallelism(8)
	b.ResetTimer()
	cpu.begin(b)
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		r := newRP(b, f, reg)
		mu.Unlock()
		refresh := r.signIn(b, "alice", pw).token.RefreshToken
		for pb.Next() {
			tok, err := r.cfg.TokenSource(r.ctx, &oauth2.Token{RefreshToken: refresh}).Token()
			if err != nil {
				b.Fatal(err)
			}
			refresh = tok.RefreshToken
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	cpu.report(b, "token")
}
