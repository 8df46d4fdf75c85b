package main

import (
	"net"
	"path/filepath"
	"strconv"
)

// The Caddy JSON config (https://caddyserver.com/docs/json/) the plugin keeps. Two
// servers: "https" with a TLS connection policy, a route and a certificate per route, and
// "http" with the plain routes and, last, the redirect to HTTPS. Every object of
// a route carries an @id, so that the admin API changes it in place (/id/...).
const (
	httpsServer = "https"
	httpServer  = "http"
	// noRouteTag is a tag no certificate has: a TLS handshake for a name no route serves
	// finds no certificate, instead of any certificate that happens to match.
	noRouteTag = "fedhost-no-route"
	redirectID = "fedhost-redirect"
)

type object = map[string]any

// routeID names a route's objects in Caddy: tenants and instances are DNS labels, so the
// dot cannot be part of either and the name is unique.
func routeID(tenant, instance string) string { return tenant + "." + instance }

func certID(id string) string   { return id + ".cert" }
func policyID(id string) string { return id + ".tls" }

// loggerName is the access logger of a tenant: Caddy writes its lines as
// http.log.access.<name>.
func loggerName(tenant string) string { return "tenant-" + tenant }

// baseConfig is the whole config with routes rs, loaded when Caddy starts (empty or
// restarted). The admin section is in it because /load replaces it too.
func baseConfig(s settings, socket, logDir string, rs []*record) object {
	https := object{
		"listen":    []string{listenAddr(s.Listen, s.HTTPSPort)},
		"protocols": []string{"h1", "h2"},
		"routes":    []any{},
		// A route's policy is put first, so the catch-all stays last.
		"tls_connection_policies": []any{object{"certificate_selection": object{"any_tag": []string{noRouteTag}}}},
		// Caddy must never get certificates itself: the host gives them. Its automatic
		// redirects are off too, as they leave out an https_port that is not 443; the
		// http server's last route redirects instead.
		"automatic_https": object{"disable": true},
		// A request for one host over a connection opened for another is refused (421).
		"strict_sni_host": true,
		"logs":            object{"logger_names": object{}, "skip_unmapped_hosts": true},
	}
	plain := object{
		"listen":    []string{listenAddr(s.Listen, s.HTTPPort)},
		"protocols": []string{"h1"},
		"routes":    []any{redirectRoute(s.HTTPSPort)},
		"logs":      object{"logger_names": object{}, "skip_unmapped_hosts": true},
	}
	logs := object{"default": object{"exclude": []string{"http.log.access"}}}
	var pems []any
	for _, r := range rs {
		srv := plain
		if r.tls() {
			srv = https
			pems = append(pems, certObject(r))
			pol := https["tls_connection_policies"].([]any)
			https["tls_connection_policies"] = append([]any{policyObject(r)}, pol...)
		}
		srv["routes"] = append([]any{routeObject(r)}, srv["routes"].([]any)...)
		names := srv["logs"].(object)["logger_names"].(object)
		for _, h := range r.Hosts {
			names[h] = loggerName(r.Tenant)
		}
		logs[loggerName(r.Tenant)] = accessLog(logDir, r.Tenant)
	}
	if pems == nil {
		pems = []any{}
	}
	return object{
		"admin":   adminConfig(socket),
		"logging": object{"logs": logs},
		"apps": object{
			"http": object{
				"http_port":  s.HTTPPort,
				"https_port": s.HTTPSPort,
				"servers":    object{httpsServer: https, httpServer: plain},
			},
			"tls": object{"certificates": object{"load_pem": pems}},
		},
	}
}

// adminConfig keeps the admin API on the Unix socket and off disk: the config holds
// keys, so Caddy must not save it (the plugin's records are the state).
func adminConfig(socket string) object {
	return object{"listen": "unix/" + socket, "config": object{"persist": false}}
}

func listenAddr(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func routeObject(r *record) object {
	return object{
		"@id":   routeID(r.Tenant, r.Instance),
		"match": []any{object{"host": r.Hosts}},
		"handle": []any{object{
			"handler":   "reverse_proxy",
			"upstreams": []any{object{"dial": r.Upstream}},
		}},
		"terminal": true,
	}
}

// redirectRoute sends every request on http_port that no plain route took to the same
// URL on HTTPS.
func redirectRoute(httpsPort int) object {
	to := "https://{http.request.host}"
	if httpsPort != defaultHTTPSPort {
		to += ":" + strconv.Itoa(httpsPort)
	}
	return object{
		"@id": redirectID,
		"handle": []any{object{
			"handler":     "static_response",
			"status_code": 308,
			"headers":     object{"Location": []string{to + "{http.request.uri}"}},
		}},
	}
}

func certObject(r *record) object {
	id := routeID(r.Tenant, r.Instance)
	return object{"@id": certID(id), "certificate": r.Certificate, "key": string(r.key), "tags": []string{id}}
}

func policyObject(r *record) object {
	id := routeID(r.Tenant, r.Instance)
	return object{
		"@id":                   policyID(id),
		"match":                 object{"sni": r.Hosts},
		"certificate_selection": object{"any_tag": []string{id}},
	}
}

// accessLog writes a tenant's access log as JSON lines, with the query string cut from
// the URI and the cookie and authorization headers removed (Caddy already writes them
// as REDACTED; removing them keeps even their presence out).
func accessLog(logDir, tenant string) object {
	return object{
		"writer": object{
			"output":   "file",
			"filename": filepath.Join(logDir, tenant+".log"),
			"mode":     "0600",
			"dir_mode": "0700",
		},
		"encoder": object{
			"format": "filter",
			"wrap":   object{"format": "json"},
			"fields": object{
				"request>uri":                         object{"filter": "regexp", "regexp": `\?.*$`, "value": ""},
				"request>headers>Cookie":              object{"filter": "delete"},
				"request>headers>Authorization":       object{"filter": "delete"},
				"request>headers>Proxy-Authorization": object{"filter": "delete"},
				"resp_headers>Set-Cookie":             object{"filter": "delete"},
			},
		},
		"include": []string{"http.log.access." + loggerName(tenant)},
	}
}
