package main

import (
	"context"
	_ "embed"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

// version is the Mastodon release the pinned images run.
const version = "4.3.8"

//go:embed schema.json
var schemaJSON []byte

//go:embed settings.rb
var settingsScript string

var pinned = appkit.Images{
	"web":       "ghcr.io/mastodon/mastodon:v" + version,
	"sidekiq":   "ghcr.io/mastodon/mastodon:v" + version,
	"streaming": "ghcr.io/mastodon/mastodon-streaming:v" + version,
}

type config struct {
	SiteTitle             string `json:"site_title"`
	SiteDescription       string `json:"site_description"`
	ContactEmail          string `json:"contact_email"`
	Registrations         string `json:"registrations"`
	SingleUserMode        bool   `json:"single_user_mode"`
	DefaultLocale         string `json:"default_locale"`
	AuthorizedFetch       bool   `json:"authorized_fetch"`
	LimitedFederationMode bool   `json:"limited_federation_mode"`
	AdminUsername         string `json:"admin_username"`
	AdminEmail            string `json:"admin_email"`
	MailSender            string `json:"mail_sender"`
	OIDCLogin             bool   `json:"oidc_login"`
	OIDCOnly              bool   `json:"oidc_only"`
	// HostName is the app's host name under the domain (x-hostname): the server's name to
	// other servers, so the schema warns against changing it once it federates.
	HostName string `json:"host_name"`
}

type mastodon struct {
	*appkit.Base
}

func newMastodon() *mastodon {
	return &mastodon{Base: appkit.NewBase(
		appkit.MustOptions(schemaJSON),
		pinned,
		// Upgrade notes of each 4.x release are written against the release before it, and
		// their migrations assume it: step through minors.
		app.VersionGuard{Version: version, MaxStep: app.StepMinor, OnDowngrade: app.DowngradeRefuse},
		[]app.RoleGroup{
			{Name: "mastodon-owners", Description: "Mastodon Owner role. The first administrator is a member.", Roles: []string{"Owner"}},
			{Name: "application-admins", Description: "Admin role in every application of the deployment. The first administrator is a member.", Roles: []string{"Admin"}},
			{Name: "mastodon-admins", Description: "Mastodon Admin role. The first administrator is not a member.", Roles: []string{"Admin"}},
			{Name: "application-moderators", Description: "Moderator role in every application of the deployment. The first administrator is not a member.", Roles: []string{"Moderator"}},
			{Name: "mastodon-moderators", Description: "Mastodon Moderator role. The first administrator is not a member.", Roles: []string{"Moderator"}},
		},
	)}
}

// The files of the secrets request.
const (
	secretKeyBase     = "secret-key-base"
	otpSecret         = "otp-secret"
	arPrimaryKey      = "ar-primary-key"
	arDeterministic   = "ar-deterministic-key"
	arDerivationSalt  = "ar-key-derivation-salt"
	vapidKey          = "vapid-key"
	oidcRedirectPath  = "/auth/auth/openid_connect/callback"
	mediaBucket       = "media"
	mediaKey          = "app"
	streamingHealth   = "/api/v1/streaming/health"
	webHealth         = "/health"
	webStartupSeconds = 900
)

func (m *mastodon) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	return appkit.Requests(req, m.Options, m.requests)
}

func (m *mastodon) requests(c config, domain string) []app.ResourceRequest {
	reqs := []app.ResourceRequest{
		appkit.Request("secrets", contract.Secret, contract.SecretRequest{Files: map[string]contract.SecretFile{
			// bin/rails secret: 64 random bytes, hex.
			secretKeyBase: {Generate: &contract.Generate{Length: 64, Encoding: "hex"}},
			otpSecret:     {Generate: &contract.Generate{Length: 64, Encoding: "hex"}},
			// bin/rails db:encryption:init: 32 alphanumeric characters each (new in 4.3).
			arPrimaryKey:     {Generate: &contract.Generate{Length: 32, Encoding: "alphanumeric"}},
			arDeterministic:  {Generate: &contract.Generate{Length: 32, Encoding: "alphanumeric"}},
			arDerivationSalt: {Generate: &contract.Generate{Length: 32, Encoding: "alphanumeric"}},
			// Web push (VAPID) signs with a P-256 key.
			vapidKey: {Generate: &contract.Generate{KeyPair: "ecdsa-p256"}},
		}}),
		appkit.Request("db", contract.PostgreSQL, contract.PostgreSQLRequest{}),
		appkit.Request("cache", contract.Redis, contract.RedisRequest{}),
		appkit.Request("media", contract.S3, contract.S3Request{
			// Media are linked directly from posts, here and on other servers.
			Buckets: map[string]contract.S3Bucket{mediaBucket: {PublicRead: true, CORS: []contract.S3CORS{{
				AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"},
			}}}},
			Keys: map[string]contract.S3Key{mediaKey: {Grants: map[string]string{mediaBucket: "owner"}}},
		}),
		appkit.Request("mail", contract.SMTP, contract.SMTPRequest{Sender: c.MailSender, Domain: domain}),
	}
	if c.OIDCLogin {
		reqs = append(reqs, appkit.SSO("Mastodon", oidcRedirectPath, m.GroupNames())...)
	}
	return reqs
}

func (m *mastodon) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	domain := req.Domain
	in, err := appkit.Prepare(req, m.Options, m.requests)
	if err != nil {
		return nil, err
	}
	c, res := in.Config, in.Results
	secrets, db, cache, media, mail := in.Secrets, in.DB, in.Cache, in.Media, in.Mail
	if err := appkit.RequireFiles(secrets, secretKeyBase, otpSecret, arPrimaryKey, arDeterministic, arDerivationSalt, vapidKey); err != nil {
		return nil, err
	}
	bucket, ok := media.Buckets[mediaBucket]
	if !ok {
		return nil, appkit.InvalidResult("media", "has no bucket "+mediaBucket)
	}
	key, ok := media.Keys[mediaKey]
	if !ok {
		return nil, appkit.InvalidResult("media", "has no key "+mediaKey)
	}
	var sso *contract.OIDCResult
	if c.OIDCLogin {
		sso = &contract.OIDCResult{}
		if err := res.Decode("sso", sso); err != nil {
			return nil, err
		}
	}
	host := appkit.Host(c.HostName, domain)

	// Database and Redis: every process.
	backing := func(n *appkit.Node) {
		n.Env("RAILS_ENV", "production").
			Env("NODE_ENV", "production").
			Env("LOCAL_DOMAIN", host).
			Env("DB_HOST", db.Host).
			Env("DB_PORT", strconv.Itoa(db.Port)).
			Env("DB_NAME", db.Database).
			Env("DB_USER", db.User).
			Env("DB_SSLMODE", db.SSLMode).
			SecretEnv("DB_PASS", db.Password.Secret).
			Env("REDIS_HOST", cache.Host).
			Env("REDIS_PORT", strconv.Itoa(cache.Port)).
			Env("REDIS_USER", cache.User).
			// The Redis ACL limits the user to its key prefix; REDIS_NAMESPACE (deprecated in
			// 4.3, still read) puts Mastodon's keys below it.
			Env("REDIS_NAMESPACE", strings.TrimSuffix(cache.KeyPrefix, ":")).
			SecretEnv("REDIS_PASSWORD", cache.Password.Secret)
	}
	// The Rails processes: web and sidekiq.
	rails := func(n *appkit.Node) {
		backing(n)
		n.Env("SINGLE_USER_MODE", appkit.Bool(c.SingleUserMode)).
			Env("AUTHORIZED_FETCH", appkit.Bool(c.AuthorizedFetch)).
			Env("LIMITED_FEDERATION_MODE", appkit.Bool(c.LimitedFederationMode)).
			Env("DEFAULT_LOCALE", c.DefaultLocale).
			Env("RAILS_LOG_TO_STDOUT", "enabled").
			Env("RAILS_SERVE_STATIC_FILES", "true").
			SecretEnv("SECRET_KEY_BASE", secrets.Files[secretKeyBase].Ref).
			SecretEnv("OTP_SECRET", secrets.Files[otpSecret].Ref).
			SecretEnv("ACTIVE_RECORD_ENCRYPTION_PRIMARY_KEY", secrets.Files[arPrimaryKey].Ref).
			SecretEnv("ACTIVE_RECORD_ENCRYPTION_DETERMINISTIC_KEY", secrets.Files[arDeterministic].Ref).
			SecretEnv("ACTIVE_RECORD_ENCRYPTION_KEY_DERIVATION_SALT", secrets.Files[arDerivationSalt].Ref).
			Env("S3_ENABLED", "true").
			Env("S3_BUCKET", bucket).
			Env("S3_ENDPOINT", media.Endpoint).
			Env("S3_REGION", media.Region).
			Env("S3_PROTOCOL", "https").
			Env("S3_OVERRIDE_PATH_STYLE", appkit.Bool(!media.PathStyle)).
			Env("AWS_ACCESS_KEY_ID", key.AccessKeyID).
			SecretEnv("AWS_SECRET_ACCESS_KEY", key.SecretAccessKey.Secret).
			Env("SMTP_SERVER", mail.Host).
			Env("SMTP_PORT", strconv.Itoa(mail.Port)).
			Env("SMTP_LOGIN", mail.User).
			Env("SMTP_FROM_ADDRESS", mail.From).
			Env("SMTP_AUTH_METHOD", "plain").
			SecretEnv("SMTP_PASSWORD", mail.Password.Secret)
		switch mail.TLS {
		case "tls":
			n.Env("SMTP_TLS", "true").Env("SMTP_ENABLE_STARTTLS", "never")
		case "starttls":
			n.Env("SMTP_ENABLE_STARTTLS", "always")
		default:
			n.Env("SMTP_ENABLE_STARTTLS", "never")
		}
		// The secret store gives the VAPID key pair as PEM; Mastodon wants the raw keys,
		// base64url, as its mastodon:webpush:generate_vapid_key task prints them.
		vapid := appkit.SecretFile(n, vapidKey, secrets.Files[vapidKey].Ref)
		n.Shell(`export VAPID_PRIVATE_KEY="$(ruby -ropenssl -rbase64 -e 'k = OpenSSL::PKey.read(File.read(ARGV[0])); print Base64.urlsafe_encode64(k.private_key.to_s(2).rjust(32, "\0"))' "$` + vapid + `")"`)
		n.Shell(`export VAPID_PUBLIC_KEY="$(ruby -ropenssl -rbase64 -e 'k = OpenSSL::PKey.read(File.read(ARGV[0])); print Base64.urlsafe_encode64(k.public_key.to_bn.to_s(2))' "$` + vapid + `")"`)
		if sso != nil {
			n.Env("OIDC_ENABLED", "true").
				Env("OIDC_DISPLAY_NAME", "Single sign-on").
				Env("OIDC_ISSUER", sso.Issuer).
				Env("OIDC_DISCOVERY", "true").
				Env("OIDC_SCOPE", "openid,profile,email").
				Env("OIDC_UID_FIELD", "preferred_username").
				Env("OIDC_CLIENT_ID", sso.ClientID).
				// Not ${url:http}: sidekiq, which has no port, loads it too; Mastodon
				// federates on 443 only, where the two are the same.
				Env("OIDC_REDIRECT_URI", "https://"+host+oidcRedirectPath).
				Env("OIDC_SECURITY_ASSUME_EMAIL_IS_VERIFIED", "true").
				Env("OMNIAUTH_ONLY", appkit.Bool(c.OIDCOnly)).
				SecretEnv("OIDC_CLIENT_SECRET", sso.ClientSecret.Secret)
		}
	}

	web := appkit.NewNode("web", m.Image("web"))
	rails(web)
	settings := web.File("settings.rb", settingsScript)
	web.Env("PORT", "${port:http}").
		Env("BIND", "${host}").
		Env("FEDHOST_SITE_TITLE", c.SiteTitle).
		Env("FEDHOST_SITE_DESCRIPTION", c.SiteDescription).
		Env("FEDHOST_CONTACT_EMAIL", c.ContactEmail).
		Env("FEDHOST_REGISTRATIONS_MODE", registrationsMode(c)).
		Env("FEDHOST_ADMIN_USERNAME", c.AdminUsername).
		Env("FEDHOST_ADMIN_EMAIL", c.AdminEmail).
		// Creates the schema on a new database and runs pending migrations after an update.
		Shell(`bundle exec rails db:prepare`).
		Shell(`bundle exec rails runner "$`+settings+`"`).
		// tootctl prints the new account's password: keep it out of the logs. The owner
		// sets one through the reset mail or logs in with single sign-on.
		Shell(`if [ -n "$FEDHOST_ADMIN_EMAIL" ]; then bin/tootctl accounts create "$FEDHOST_ADMIN_USERNAME" --email "$FEDHOST_ADMIN_EMAIL" --confirmed --role Owner >/dev/null 2>&1 || true; fi`).
		Command("bundle", "exec", "puma", "-C", "config/puma.rb").
		Port("http").
		Health("http", webHealth, webStartupSeconds)

	sidekiq := appkit.NewNode("sidekiq", m.Image("sidekiq"))
	rails(sidekiq)
	sidekiq.Command("bundle", "exec", "sidekiq")

	streaming := appkit.NewNode("streaming", m.Image("streaming"))
	backing(streaming)
	streaming.Env("PORT", "${port:http}").
		Env("BIND", "${host}").
		Command("node", "./streaming/index.js").
		Port("http").
		Health("http", streamingHealth, 120)

	return appkit.Nodes(web, streaming, sidekiq)
}

// registrationsMode maps the option to Mastodon's registrations_mode setting.
func registrationsMode(c config) string {
	switch {
	case c.SingleUserMode || c.Registrations == "closed":
		return "none"
	case c.Registrations == "approval":
		return "approved"
	default:
		return "open"
	}
}

var (
	_ app.App         = (*mastodon)(nil)
	_ app.Guarded     = (*mastodon)(nil)
	_ app.Operator    = (*mastodon)(nil)
	_ app.RoleGrouper = (*mastodon)(nil)
)
