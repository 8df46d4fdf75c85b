package main

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// maxForwardedHops bounds how much of X-Forwarded-For is read.
const maxForwardedHops = 32

// origin is where a request came from and which host it asked for: what the peer says
// when the peer is a trusted proxy, the connection itself otherwise.
type origin struct {
	client netip.Addr
	host   string
}

func (s *server) originOf(r *http.Request) origin {
	peer := remoteAddr(r.RemoteAddr)
	o := origin{client: peer, host: r.Host}
	if !s.trusted(peer) {
		return o
	}
	if h := r.Header.Get("X-Forwarded-Host"); h != "" && !strings.Contains(h, ",") {
		o.host = h
	}
	o.client = clientFromForwarded(r.Header.Values("X-Forwarded-For"), peer, s.trusted)
	return o
}

func (s *server) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range s.trustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func remoteAddr(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// clientFromForwarded walks X-Forwarded-For from the right, past the trusted proxies,
// to the first address a trusted proxy saw connect: entries left of it are what the
// client itself claimed and are not believed. With no such entry it is peer.
func clientFromForwarded(values []string, peer netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
	var hops []string
	for _, v := range values {
		hops = append(hops, strings.Split(v, ",")...)
		if len(hops) > maxForwardedHops {
			hops = hops[len(hops)-maxForwardedHops:]
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !trusted(client) {
			return client
		}
	}
	return client
}

// hostKey is a Host header's name and port, lower-cased, with the default port of https
// dropped: the form issuers are indexed by.
func hostKey(host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if h, p, err := net.SplitHostPort(host); err == nil && p == "443" {
		return strings.TrimSuffix(h, ".")
	}
	return host
}
