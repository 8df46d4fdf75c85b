package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"strconv"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

// version is the PeerTube release the pinned image runs.
const version = "7.2.1"

//go:embed schema.json
var schemaJSON []byte

//go:embed oidc-settings.js
var oidcSettingsScript string

var pinned = appkit.Images{"peertube": "docker.io/chocobozzz/peertube:v" + version + "-bookworm"}

type config struct {
	InstanceName        string   `json:"instance_name"`
	InstanceDescription string   `json:"instance_description"`
	InstanceTerms       string   `json:"instance_terms"`
	AdminEmail          string   `json:"admin_email"`
	ContactForm         bool     `json:"contact_form"`
	Signup              string   `json:"signup"`
	SignupLimit         int      `json:"signup_limit"`
	SignupVerifyEmail   bool     `json:"signup_requires_email_verification"`
	VideoQuotaMB        int64    `json:"video_quota_mb"`
	VideoQuotaDailyMB   int64    `json:"video_quota_daily_mb"`
	Transcoding         bool     `json:"transcoding"`
	TranscodingThreads  int      `json:"transcoding_threads"`
	Resolutions         []string `json:"transcoding_resolutions"`
	TranscodingHLS      bool     `json:"transcoding_hls"`
	TranscodingWeb      bool     `json:"transcoding_web_videos"`
	ImportHTTP          bool     `json:"import_http"`
	ImportTorrent       bool     `json:"import_torrent"`
	SignFederated       bool     `json:"sign_federated_fetches"`
	MailSender          string   `json:"mail_sender"`
	OIDCLogin           bool     `json:"oidc_login"`
	// HostName is the app's host name under the domain (x-hostname): the server's name to
	// other servers, so the schema warns against changing it once it federates.
	HostName string `json:"host_name"`
}

// The logical buckets, named after PeerTube's object_storage sections.
const (
	bucketPlaylists = "playlists"
	bucketWebVideos = "web-videos"
	bucketOriginals = "originals"
	bucketExports   = "exports"
	mediaKey        = "app"

	peertubeSecret   = "peertube-secret"
	rootPassword     = "root-password"
	oidcRedirectPath = "/plugins/auth-openid-connect/router/code-cb"
	oidcPlugin       = "peertube-plugin-auth-openid-connect"
)

var resolutions = []string{"144p", "240p", "360p", "480p", "720p", "1080p", "1440p", "2160p"}

type peertube struct {
	*appkit.Base
}

func newPeerTube() *peertube {
	return &peertube{Base: appkit.NewBase(
		appkit.MustOptions(schemaJSON),
		pinned,
		// PeerTube's upgrade guide allows any newer release but asks to apply the
		// "IMPORTANT NOTES" (scripts, config changes) of every major in between: one major
		// at a time.
		app.VersionGuard{Version: version, MaxStep: app.StepMajor, OnDowngrade: app.DowngradeRefuse},
		[]app.RoleGroup{
			{Name: "application-admins", Description: "PeerTube role 0 (administrator) in every application of the deployment. The first administrator is a member.", Roles: []string{"0"}},
			{Name: "peertube-admins", Description: "PeerTube role 0 (administrator). The first administrator is not a member.", Roles: []string{"0"}},
			{Name: "application-moderators", Description: "PeerTube role 1 (moderator) in every application of the deployment. The first administrator is not a member.", Roles: []string{"1"}},
			{Name: "peertube-moderators", Description: "PeerTube role 1 (moderator). The first administrator is not a member.", Roles: []string{"1"}},
		},
	)}
}

func (p *peertube) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	return appkit.Requests(req, p.Options, p.requests)
}

func (p *peertube) requests(c config, domain string) []app.ResourceRequest {
	// Players on other instances fetch public video files across origins.
	public := contract.S3Bucket{PublicRead: true, CORS: []contract.S3CORS{{
		AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"}, AllowedHeaders: []string{"*"},
	}}}
	reqs := []app.ResourceRequest{
		appkit.Request("secrets", contract.Secret, contract.SecretRequest{Files: map[string]contract.SecretFile{
			// secrets.peertube: openssl rand -hex 32.
			peertubeSecret: {Generate: &contract.Generate{Length: 32, Encoding: "hex"}},
			// PT_INITIAL_ROOT_PASSWORD, so that PeerTube does not print one to its log.
			rootPassword: {Generate: &contract.Generate{Length: 24, Encoding: "alphanumeric"}},
		}}),
		appkit.Request("db", contract.PostgreSQL, contract.PostgreSQLRequest{Extensions: []string{"pg_trgm", "unaccent"}}),
		appkit.Request("cache", contract.Redis, contract.RedisRequest{}),
		appkit.Request("media", contract.S3, contract.S3Request{
			Buckets: map[string]contract.S3Bucket{
				bucketPlaylists: public,
				bucketWebVideos: public,
				bucketOriginals: {},
				bucketExports:   {},
			},
			Keys: map[string]contract.S3Key{mediaKey: {Grants: map[string]string{
				bucketPlaylists: "owner", bucketWebVideos: "owner", bucketOriginals: "owner", bucketExports: "owner",
			}}},
		}),
		appkit.Request("mail", contract.SMTP, contract.SMTPRequest{Sender: c.MailSender, Domain: domain}),
	}
	if c.OIDCLogin {
		reqs = append(reqs, appkit.SSO("PeerTube", oidcRedirectPath, p.GroupNames())...)
	}
	return reqs
}

func (p *peertube) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	domain := req.Domain
	in, err := appkit.Prepare(req, p.Options, p.requests)
	if err != nil {
		return nil, err
	}
	c, res := in.Config, in.Results
	secrets, db, cache, media, mail := in.Secrets, in.DB, in.Cache, in.Media, in.Mail
	if err := appkit.RequireFiles(secrets, peertubeSecret, rootPassword); err != nil {
		return nil, err
	}
	buckets := map[string]string{}
	for _, b := range []string{bucketPlaylists, bucketWebVideos, bucketOriginals, bucketExports} {
		if buckets[b] = media.Buckets[b]; buckets[b] == "" {
			return nil, appkit.InvalidResult("media", "has no bucket "+b)
		}
	}
	key, ok := media.Keys[mediaKey]
	if !ok {
		return nil, appkit.InvalidResult("media", "has no key "+mediaKey)
	}
	host := appkit.Host(c.HostName, domain)
	adminEmail := c.AdminEmail
	if adminEmail == "" {
		adminEmail = "admin@" + host
	}
	const mb = 1024 * 1024
	quota, daily := c.VideoQuotaMB, c.VideoQuotaDailyMB
	if quota > 0 {
		quota *= mb
	}
	if daily > 0 {
		daily *= mb
	}

	// Options without a PEERTUBE_* variable go through node-config's NODE_CONFIG, which
	// also outranks the admin pages' local-production.json.
	nodeConfig, err := json.Marshal(map[string]any{
		"listen": map[string]any{"hostname": "${host}", "port": "${port:http}"},
		"signup": map[string]any{"requires_approval": c.Signup == "approval", "requires_email_verification": c.SignupVerifyEmail},
		"user":   map[string]any{"video_quota_daily": daily},
	})
	if err != nil {
		return nil, err
	}

	n := appkit.NewNode("peertube", p.Image("peertube"))
	n.Env("NODE_CONFIG", string(nodeConfig)).
		Env("PEERTUBE_WEBSERVER_HOSTNAME", host).
		Env("PEERTUBE_WEBSERVER_PORT", "443").
		Env("PEERTUBE_WEBSERVER_HTTPS", "true").
		SecretEnv("PEERTUBE_SECRET", secrets.Files[peertubeSecret].Ref).
		SecretEnv("PT_INITIAL_ROOT_PASSWORD", secrets.Files[rootPassword].Ref).
		Env("PEERTUBE_DB_HOSTNAME", db.Host).
		Env("PEERTUBE_DB_PORT", strconv.Itoa(db.Port)).
		Env("PEERTUBE_DB_NAME", db.Database).
		Env("PEERTUBE_DB_USERNAME", db.User).
		Env("PEERTUBE_DB_SSL", appkit.Bool(db.SSLMode != "disable")).
		SecretEnv("PEERTUBE_DB_PASSWORD", db.Password.Secret).
		Env("PEERTUBE_REDIS_HOSTNAME", cache.Host).
		Env("PEERTUBE_REDIS_PORT", strconv.Itoa(cache.Port)).
		SecretEnv("PEERTUBE_REDIS_AUTH", cache.Password.Secret).
		Env("PEERTUBE_SMTP_HOSTNAME", mail.Host).
		Env("PEERTUBE_SMTP_PORT", strconv.Itoa(mail.Port)).
		Env("PEERTUBE_SMTP_USERNAME", mail.User).
		Env("PEERTUBE_SMTP_FROM", mail.From).
		Env("PEERTUBE_SMTP_TLS", appkit.Bool(mail.TLS == "tls")).
		Env("PEERTUBE_SMTP_DISABLE_STARTTLS", appkit.Bool(mail.TLS == "none")).
		SecretEnv("PEERTUBE_SMTP_PASSWORD", mail.Password.Secret).
		Env("PEERTUBE_OBJECT_STORAGE_ENABLED", "true").
		Env("PEERTUBE_OBJECT_STORAGE_ENDPOINT", media.Endpoint).
		Env("PEERTUBE_OBJECT_STORAGE_REGION", media.Region).
		Env("PEERTUBE_OBJECT_STORAGE_CREDENTIALS_ACCESS_KEY_ID", key.AccessKeyID).
		SecretEnv("PEERTUBE_OBJECT_STORAGE_CREDENTIALS_SECRET_ACCESS_KEY", key.SecretAccessKey.Secret).
		Env("PEERTUBE_OBJECT_STORAGE_UPLOAD_ACL_PUBLIC", "public-read").
		Env("PEERTUBE_OBJECT_STORAGE_UPLOAD_ACL_PRIVATE", "private").
		Env("PEERTUBE_OBJECT_STORAGE_STREAMING_PLAYLISTS_BUCKET_NAME", buckets[bucketPlaylists]).
		Env("PEERTUBE_OBJECT_STORAGE_WEB_VIDEOS_BUCKET_NAME", buckets[bucketWebVideos]).
		Env("PEERTUBE_OBJECT_STORAGE_ORIGINAL_VIDEO_FILES_BUCKET_NAME", buckets[bucketOriginals]).
		Env("PEERTUBE_OBJECT_STORAGE_USER_EXPORTS_BUCKET_NAME", buckets[bucketExports]).
		Env("PEERTUBE_ADMIN_EMAIL", adminEmail).
		Env("PEERTUBE_CONTACT_FORM_ENABLED", appkit.Bool(c.ContactForm)).
		Env("PEERTUBE_SIGNUP_ENABLED", appkit.Bool(c.Signup != "closed")).
		Env("PEERTUBE_SIGNUP_LIMIT", strconv.Itoa(c.SignupLimit)).
		Env("PEERTUBE_USER_VIDEO_QUOTA", strconv.FormatInt(quota, 10)).
		Env("PEERTUBE_INSTANCE_NAME", c.InstanceName).
		Env("PEERTUBE_INSTANCE_DESCRIPTION", c.InstanceDescription).
		Env("PEERTUBE_INSTANCE_TERMS", c.InstanceTerms).
		Env("PEERTUBE_TRANSCODING_ENABLED", appkit.Bool(c.Transcoding)).
		Env("PEERTUBE_TRANSCODING_THREADS", strconv.Itoa(c.TranscodingThreads)).
		Env("PEERTUBE_TRANSCODING_HLS_ENABLED", appkit.Bool(c.TranscodingHLS)).
		Env("PEERTUBE_TRANSCODING_WEB_VIDEOS_ENABLED", appkit.Bool(c.TranscodingWeb)).
		Env("PEERTUBE_IMPORT_VIDEOS_HTTP", appkit.Bool(c.ImportHTTP)).
		Env("PEERTUBE_IMPORT_VIDEOS_TORRENT", appkit.Bool(c.ImportTorrent)).
		Env("PEERTUBE_SIGN_FEDERATED_FETCHES", appkit.Bool(c.SignFederated))
	if media.PathStyle {
		// PeerTube addresses buckets as virtual hosts unless given the public base URL.
		n.Env("PEERTUBE_OBJECT_STORAGE_STREAMING_PLAYLISTS_BASE_URL", media.Endpoint+"/"+buckets[bucketPlaylists]).
			Env("PEERTUBE_OBJECT_STORAGE_WEB_VIDEOS_BASE_URL", media.Endpoint+"/"+buckets[bucketWebVideos])
	}
	on := map[string]bool{}
	for _, r := range c.Resolutions {
		on[r] = true
	}
	for _, r := range resolutions {
		n.Env("PEERTUBE_TRANSCODING_"+r[:len(r)-1]+"P", appkit.Bool(on[r]))
	}
	if c.OIDCLogin {
		var sso contract.OIDCResult
		if err := res.Decode("sso", &sso); err != nil {
			return nil, err
		}
		script := n.File("oidc-settings.js", oidcSettingsScript)
		n.Env("FEDHOST_OIDC_ISSUER", sso.Issuer).
			Env("FEDHOST_OIDC_CLIENT_ID", sso.ClientID).
			SecretEnv("FEDHOST_OIDC_CLIENT_SECRET", sso.ClientSecret.Secret).
			// The plugin CLI needs PeerTube's tables: on the very first start it fails
			// (logged, not fatal) and the plugin comes with the next start.
			Shell(`if [ ! -d /data/plugins/node_modules/` + oidcPlugin + ` ]; then (cd /app && npm run plugin:install -- --npm-name ` + oidcPlugin + `) || echo "fedhost: ` + oidcPlugin + ` not installed yet" >&2; fi`).
			Shell(`node "$` + script + `" || true`)
	}
	// The image's entrypoint copies the config and drops to the peertube user; it ran
	// once before this script without the secrets, so run it again with them.
	n.Command("docker-entrypoint.sh", "node", "dist/server").
		Port("http").
		Health("http", "/api/v1/ping", 600).
		Volume("data", "/data")
	return appkit.Nodes(n)
}

var (
	_ app.App         = (*peertube)(nil)
	_ app.Guarded     = (*peertube)(nil)
	_ app.Operator    = (*peertube)(nil)
	_ app.RoleGrouper = (*peertube)(nil)
)
