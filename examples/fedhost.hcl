# fedhost.hcl: the configuration of `fedhost serve`.
#
# This file spells out the embedded default (what fedhost runs with no file) and adds a
# Redis provider, a registrar and an app block to show them. Every top-level setting can also
# be given as an environment variable (FEDHOST_<NAME>, e.g. FEDHOST_DATA_DIR) or a flag
# (--data-dir); a flag beats the environment, which beats this file.

# host:port the HTTP server (operator UI and API) listens on.
listen = "127.0.0.1:8080"

# Directory for the SQLite database, the secrets key and the managed services.
data_dir = "./data"

# "sqlite" (a file in data_dir), or a PostgreSQL URL to run several fedhost processes
# on one database, e.g. "postgres://fedhost@db/fedhost". Keep a password out of this
# file: set FEDHOST_DATABASE in the service's environment instead.
database = "sqlite"

# Directory the plugins are loaded from.
plugin_dir = "bin/plugins"

# trace, debug, info, warn or error; and text or json.
log_level  = "info"
log_format = "text"

# How long the HTTP server waits: to read a request (headers and body), to write an
# answer (a build's event stream gets this much for each write), and for a kept-alive
# connection's next request. A client slower than these is cut.
read_timeout  = "30s"
write_timeout = "60s"
idle_timeout  = "120s"

# Reverse proxies in front of fedhost, as IPs or CIDRs, comma-separated: only from these
# are X-Forwarded-Proto (https: secure cookies) and X-Real-IP (the client address in the
# audit trail and the log-in limits) believed. Empty trusts no one.
trusted_proxies = ""

# Deployments an operator may hold (superusers: any number); 0 sets no limit.
max_deployments_per_operator = "20"

# The front door (the route provider): the public IPs each app host name's A/AAAA
# records point at, and the ports it serves HTTPS and HTTP (a redirect) on.
front_door_addresses  = "127.0.0.1"
front_door_https_port = "8443"
front_door_http_port  = "8000"

# The domain the UI offers for a new deployment; {namespace} stands for its namespace.
# *.localhost names reach this machine; a provider with real domains sets "".
suggested_domain = "{namespace}.localhost"

# Who may read GET /metrics (Prometheus): "off", "loopback" (a scraper on this machine)
# or "token" (Authorization: Bearer <the contents of metrics_token_file>).
metrics = "loopback"
# metrics_token_file = "/etc/fedhost/metrics-token"

# One block per resource type the applications may ask for: which provider plugin
# answers it, with the provider's settings and limits. Known types: secret, postgresql,
# s3, redis, smtp, dns, tls, ldap, oidc, instance, route. Once this file has a resource block,
# only the types declared here are offered.

# A PostgreSQL cluster managed by fedhost in data_dir; one role and database per
# deployment.
resource "postgresql" {
  provider = "postgresql"
  settings = { managed = true }
}

# versitygw managed by fedhost in data_dir; one user and bucket per deployment.
resource "s3" {
  provider = "versitygw"
  settings = { managed = true }
}

# Secrets encrypted at rest with a key file in data_dir.
resource "secret" {
  provider = "embedded"
}

# Applications run as supervised processes on this machine.
resource "instance" {
  provider = "local"
  limits   = { per_deployment = 8 }
}

# Certificates from a CA of the host in data_dir (print its root with `fedhost ca root`
# and trust it), for the apps' host names: on one machine, under .localhost.
resource "tls" {
  provider = "localca"
}

# The front door: a Caddy managed by fedhost in data_dir, configured through its admin
# API on a Unix socket, listening on front_door_https_port and front_door_http_port.
resource "route" {
  provider = "caddy"
  settings = { managed = true, listen = "127.0.0.1" }
}

# Each deployment's directory of users: a slapd managed by fedhost in data_dir (Debian's
# slapd package), a subtree and a bind account per deployment.
resource "ldap" {
  provider = "openldap"
  settings = { managed = true }
}

# Each deployment's single sign-on: an OpenID provider at https://auth.<domain>/, behind
# the front door, signing users in against the deployment's directory.
resource "oidc" {
  provider = "builtin"
}

# An existing Redis server of the provider; one ACL user and key prefix per deployment.
# The admin password is the name of a secret, never the password itself.
resource "redis" {
  provider = "redis"
  settings = {
    address         = "127.0.0.1:6379"
    password_secret = "providers/redis/admin"
  }
}

# A mail relay run by the relay plugin: a submission account per deployment that sends
# only from its own address on the deployment's domain, handed to the provider's mail
# server. The upstream password is in a file, never in this one.
resource "smtp" {
  provider = "relay"
  settings = {
    listen   = "127.0.0.1:2525"
    tls      = "none"
    upstream = { host = "smtp.provider.example", user = "fedhost-relay", password_file = "/etc/fedhost/relay-upstream-password" }
  }
}

# A registrar driver, to register and renew operators' domains. Its key pair stays in
# files readable by fedhost only (plugins/registrars/porkbun/README.md).
registrar "porkbun" {
  settings = {
    api_key_file        = "/etc/fedhost/porkbun-api-key"
    secret_api_key_file = "/etc/fedhost/porkbun-secret-api-key"
  }
}

# The resolver asked whether an operator's own domain is delegated to the provider's
# nameservers (an IP or host name, port 53 unless given); empty asks the system's.
domain_delegation_resolver = ""
# How long a build follows a registration the registry keeps pending; after that the
# build fails unavailable and the next build follows on.
domain_pending_follow = "2m"
# How often each registrar's account is listed (expiry, lock, nameservers) and the
# domains that expire within 30 days renewed.
domain_snapshot_interval = "24h"

# The settings of an app plugin, the same for every deployment of the app (each
# deployment chooses the app's options). Checked against the plugin's settings schema.
app "hello" {
  settings = { footer = "Hosted by Example" }
}
