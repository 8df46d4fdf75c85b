package contract

// SecretRequest asks for secret files of one instance.
type SecretRequest struct {
	// Files maps a file name (DNS-safe) to how its value is made.
	Files map[string]SecretFile `json:"files"`
}

// SecretFile is made either by generation or supplied by the operator (its value then
// comes in resource.Request.Secrets under the file name).
type SecretFile struct {
	Generate *Generate `json:"generate,omitempty"`
	Supplied bool      `json:"supplied,omitempty"`
}

// Generate describes a generated value: random bytes of Length in an Encoding, or a key
// pair (whose public half is given in the result).
type Generate struct {
	// Length is the number of random bytes (8 to 1024); for "alphanumeric", characters.
	Length int `json:"length,omitempty"`
	// Encoding is one of "hex", "base64", "base64url", "alphanumeric" (the default).
	Encoding string `json:"encoding,omitempty"`
	// KeyPair is "ed25519" or "ecdsa-p256" for a key pair, PEM encoded, instead of random bytes.
	KeyPair string `json:"key_pair,omitempty"`
}

// SecretResult gives a reference to each file.
type SecretResult struct {
	Files map[string]SecretFileResult `json:"files"`
}

// SecretFileResult is one stored secret.
type SecretFileResult struct {
	// Ref is the provider's reference of the value; Reveal takes it.
	Ref string `json:"ref"`
	// Version counts changes of the value, from 1.
	Version int `json:"version"`
	// Public is the public half of a key pair, empty otherwise.
	Public string `json:"public,omitempty"`
}

// PostgreSQLRequest asks for a database and its owner role.
type PostgreSQLRequest struct {
	// Extensions to create in the database, from the provider's allowed list.
	Extensions []string `json:"extensions,omitempty"`
}

// PostgreSQLResult is a database: the role owns it, and only it (and the provider's
// admin role) may connect.
type PostgreSQLResult struct {
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Database string    `json:"database"`
	User     string    `json:"user"`
	Password SecretRef `json:"password"`
	// SSLMode is the libpq sslmode to use ("disable" on loopback).
	SSLMode string `json:"sslmode"`
}

// S3Request asks for buckets and keys with per-bucket grants.
type S3Request struct {
	// Buckets maps a logical bucket name to its options.
	Buckets map[string]S3Bucket `json:"buckets"`
	// Keys maps a key name to its grants.
	Keys map[string]S3Key `json:"keys,omitempty"`
}

// S3Bucket is one bucket's options.
type S3Bucket struct {
	Website    bool     `json:"website,omitempty"`
	PublicRead bool     `json:"public_read,omitempty"`
	CORS       []S3CORS `json:"cors,omitempty"`
	// Backup marks a bucket of backups, kept for a grace period after a destroy.
	Backup bool `json:"backup,omitempty"`
}

// S3CORS is one CORS rule.
type S3CORS struct {
	AllowedOrigins []string `json:"allowed_origins"`
	AllowedMethods []string `json:"allowed_methods"`
	AllowedHeaders []string `json:"allowed_headers,omitempty"`
	MaxAgeSeconds  int      `json:"max_age_seconds,omitempty"`
}

// S3Key is a key's grants: logical bucket name to "read", "write" or "owner".
type S3Key struct {
	Grants map[string]string `json:"grants"`
}

// S3Result gives the endpoint, the physical bucket names and the keys.
type S3Result struct {
	Endpoint string `json:"endpoint"`
	Region   string `json:"region"`
	// PathStyle says whether buckets are addressed as endpoint/bucket.
	PathStyle bool `json:"path_style"`
	// Buckets maps logical to physical bucket names.
	Buckets map[string]string   `json:"buckets"`
	Keys    map[string]S3Access `json:"keys"`
}

// S3Access is one key's credentials.
type S3Access struct {
	AccessKeyID     string    `json:"access_key_id"`
	SecretAccessKey SecretRef `json:"secret_access_key"`
}

// RedisRequest asks for a namespace on a Redis server.
type RedisRequest struct{}

// RedisResult is an ACL user limited to KeyPrefix.
type RedisResult struct {
	Host      string    `json:"host"`
	Port      int       `json:"port"`
	User      string    `json:"user"`
	Password  SecretRef `json:"password"`
	KeyPrefix string    `json:"key_prefix"`
}

// SMTPRequest asks for a mail relay account.
type SMTPRequest struct {
	// Sender is the local part of the From address (noreply, say).
	Sender string `json:"sender"`
	// Domain is the domain of the From address.
	Domain string `json:"domain"`
}

// SMTPResult is a relay account.
type SMTPResult struct {
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	User     string    `json:"user"`
	Password SecretRef `json:"password"`
	From     string    `json:"from"`
	// TLS is "none", "starttls" or "tls".
	TLS string `json:"tls"`
}

// DNSRequest asks for records in a zone.
type DNSRequest struct {
	Zone    string      `json:"zone"`
	Records []DNSRecord `json:"records"`
}

// DNSRecord is one resource record; Name is relative to the zone ("@" for its apex).
type DNSRecord struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
	TTL   int    `json:"ttl,omitempty"`
}

// DNSResult is the zone as served.
type DNSResult struct {
	Zone        string      `json:"zone"`
	Nameservers []string    `json:"nameservers"`
	Records     []DNSRecord `json:"records"`
	// Update, when the provider gives one, lets the deployment change its own zone by
	// dynamic update (an ACME client's DNS-01 challenge, say).
	Update *DNSUpdate `json:"update,omitempty"`
}

// DNSUpdate is how to send RFC 2136 dynamic updates signed with TSIG (RFC 8945) to the
// zone's primary server; the key is good for this zone only.
type DNSUpdate struct {
	// Server is host:port of the primary.
	Server string `json:"server"`
	// KeyName is the TSIG key name, fully qualified.
	KeyName string `json:"key_name"`
	// Algorithm is "hmac-sha256" or "hmac-sha512".
	Algorithm string `json:"algorithm"`
	// Secret is the key's secret in base64.
	Secret SecretRef `json:"secret"`
}

// TLSRequest asks for a certificate.
type TLSRequest struct {
	Domains []string `json:"domains"`
	// Challenge is how a CA that validates names is answered: "dns-01" (the default when
	// DNS is given) or "http-01". A provider that validates nothing (a local CA) ignores it.
	Challenge string `json:"challenge,omitempty"`
	// DNS is how to publish DNS-01 answers: the deployment's own zone's update key, from
	// its dns result. The host puts the key's value in resource.Request.Secrets under
	// DNS.Secret.Secret.
	DNS *DNSUpdate `json:"dns,omitempty"`
}

// TLSResult is a certificate chain (public) and its key (secret).
type TLSResult struct {
	Certificate string    `json:"certificate"`
	Key         SecretRef `json:"key"`
	// NotAfter is RFC 3339.
	NotAfter string `json:"not_after"`
	// Issuer is the issuing CA's name, for people (its subject's common name).
	Issuer string `json:"issuer,omitempty"`
	// RenewAfter (RFC 3339) is when the provider will give a new certificate rather than
	// this one: the host's scheduler provisions the resource again from then on.
	RenewAfter string `json:"renew_after,omitempty"`
	// CA is the root certificate (PEM) the chain ends at when clients do not trust it
	// already: a private CA's. The host gives it to the nodes of a deployment that call
	// the deployment's own addresses (an app reaching its OpenID provider). Empty for a
	// CA in the public trust stores.
	CA string `json:"ca,omitempty"`
}

// RouteRequest asks the front door to send requests for Hosts to Upstream. The host makes
// it for each app that has a host name, after the app's node runs; apps do not request it.
type RouteRequest struct {
	// Hosts are fully qualified host names.
	Hosts []string `json:"hosts"`
	// Upstream is host:port of the node's HTTP port.
	Upstream string `json:"upstream"`
	// TLS is the certificate to serve for Hosts; without it the route is plain HTTP.
	TLS *RouteTLS `json:"tls,omitempty"`
}

// RouteTLS is a certificate chain and its key, from a tls result. The host puts the key's
// value in resource.Request.Secrets under Key.Secret.
type RouteTLS struct {
	Certificate string    `json:"certificate"`
	Key         SecretRef `json:"key"`
}

// RouteResult is the route as served.
type RouteResult struct {
	// URLs are the addresses people use, one for each host: "https://feeds.example.org/",
	// with a port when the front door does not listen on the scheme's own.
	URLs []string `json:"urls"`
}

// LDAPRequest asks for a directory subtree with groups.
type LDAPRequest struct {
	Groups []string `json:"groups,omitempty"`
}

// LDAPResult is a subtree and a bind account limited to it.
type LDAPResult struct {
	URL          string    `json:"url"`
	BaseDN       string    `json:"base_dn"`
	UsersDN      string    `json:"users_dn"`
	GroupsDN     string    `json:"groups_dn"`
	BindDN       string    `json:"bind_dn"`
	BindPassword SecretRef `json:"bind_password"`
}

// OIDCRequest asks for a client of the deployment's OpenID provider. An app gives Name,
// RedirectURIs, Scopes and AllowedGroups; the host adds Issuer and Directory, which say
// where the deployment's provider answers and whom it signs in.
type OIDCRequest struct {
	// Name is the app's name as the provider's pages show it ("Miniflux").
	Name string `json:"name"`
	// RedirectURIs are where the provider may send the code back: absolute URLs, or
	// ${url:PORT} followed by a path, for which the host puts the app's public URL of
	// that port (as in a node's env), since only the host knows it.
	RedirectURIs []string `json:"redirect_uris"`
	Scopes       []string `json:"scopes,omitempty"`
	// AllowedGroups are the directory groups whose members may sign in to this client;
	// empty lets every user of the directory in. A user in none of them is refused at the
	// provider.
	AllowedGroups []string `json:"allowed_groups,omitempty"`
	// Issuer is the deployment's issuer URL, "https://auth.example.org/" (with a port when
	// the front door does not listen on 443). Set by the host.
	Issuer string `json:"issuer,omitempty"`
	// Directory is the deployment's directory (its ldap result), against which users sign
	// in. Set by the host, which puts the bind password's value in
	// resource.Request.Secrets under Directory.BindPassword.Secret.
	Directory *LDAPResult `json:"directory,omitempty"`
}

// OIDCResult is a registered client.
type OIDCResult struct {
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client_id"`
	ClientSecret SecretRef `json:"client_secret"`
	// Upstream is host:port where the provider serves Issuer over plain HTTP, for the
	// front door to route the issuer's host name to; empty when the provider is reached
	// at Issuer by other means.
	Upstream string `json:"upstream,omitempty"`
}

// InstanceRequest is a node spec: one process or container and how to run it.
type InstanceRequest struct {
	Artifact Artifact `json:"artifact"`
	Args     []string `json:"args,omitempty"`
	// Env values and args may hold ${host} (the address to listen on), ${port:NAME} (the
	// port allocated for a port below), ${url:NAME} (the URL at which people reach that
	// port: the provider knows whether a proxy with TLS stands in front) and ${file:NAME}
	// (the absolute path of a file below).
	Env map[string]string `json:"env,omitempty"`
	// Files are written 0600 in the node's working dir before it starts.
	Files   map[string]InstanceFile `json:"files,omitempty"`
	Ports   []Port                  `json:"ports,omitempty"`
	Health  *Health                 `json:"health,omitempty"`
	Volumes []Volume                `json:"volumes,omitempty"`
	Limits  *Limits                 `json:"limits,omitempty"`
}

// Artifact is what runs: a binary the provider has by name, or an OCI image.
type Artifact struct {
	Binary string `json:"binary,omitempty"`
	Image  string `json:"image,omitempty"`
}

// InstanceFile is a file's content: literal text, or a template whose ${secret:REF}
// placeholders take values the host revealed into resource.Request.Secrets under REF.
type InstanceFile struct {
	Content string `json:"content"`
}

// Port is a port the node listens on; the provider allocates its address.
type Port struct {
	Name string `json:"name"`
	// Protocol is "http" or "tcp".
	Protocol string `json:"protocol"`
}

// Health says how the provider knows the node is up: an HTTP GET of Path on a port that
// answers 2xx or 3xx, or a TCP connect.
type Health struct {
	Port            string `json:"port"`
	HTTPPath        string `json:"http_path,omitempty"`
	IntervalSeconds int    `json:"interval_seconds,omitempty"`
	TimeoutSeconds  int    `json:"timeout_seconds,omitempty"`
	// StartSeconds is how long the first check may take to pass.
	StartSeconds int `json:"start_seconds,omitempty"`
}

// Volume is persistent storage mounted at Path (relative paths are below the working dir).
type Volume struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	SizeMB int    `json:"size_mb,omitempty"`
}

// Limits bound the node's resources.
type Limits struct {
	MemoryMB  int `json:"memory_mb,omitempty"`
	CPUMillis int `json:"cpu_millis,omitempty"`
}

// InstanceResult is the node as it runs.
type InstanceResult struct {
	// State is "running", "starting", "stopped" or "failed".
	State string `json:"state"`
	// Addresses maps a port name to host:port.
	Addresses map[string]string `json:"addresses"`
	Message   string            `json:"message,omitempty"`
}
