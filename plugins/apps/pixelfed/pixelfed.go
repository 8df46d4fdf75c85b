package main

import (
	"context"
	_ "embed"
	"net/url"
	"strconv"

	"github.com/fedhost/fedhost/plugins/apps/internal/appkit"
	"github.com/fedhost/fedhost/sdk/app"
	"github.com/fedhost/fedhost/sdk/contract"
)

// version is the Pixelfed release the pinned images run.
const version = "0.12.5"

//go:embed schema.json
var schemaJSON []byte

// The images of Pixelfed's Docker setup (docker/ in the Pixelfed tree, published by its
// maintainer), Apache runtime.
var pinned = appkit.Images{
	"web":    "ghcr.io/jippi/docker-pixelfed:v" + version + "-apache-8.3-bookworm",
	"worker": "ghcr.io/jippi/docker-pixelfed:v" + version + "-apache-8.3-bookworm",
}

type config struct {
	AppName             string `json:"app_name"`
	InstanceDescription string `json:"instance_description"`
	ContactEmail        string `json:"contact_email"`
	Registrations       string `json:"registrations"`
	EnforceEmail        bool   `json:"enforce_email_verification"`
	MaxUsers            int    `json:"max_users"`
	DefaultLanguage     string `json:"default_language"`
	MaxPhotoSizeKB      int    `json:"max_photo_size_kb"`
	MaxCaptionLength    int    `json:"max_caption_length"`
	MaxAlbumLength      int    `json:"max_album_length"`
	AccountSizeLimitKB  int    `json:"account_size_limit_kb"`
	ImageQuality        int    `json:"image_quality"`
	Federation          bool   `json:"federation"`
	MobileApps          bool   `json:"mobile_apps"`
	AdminUsername       string `json:"admin_username"`
	AdminEmail          string `json:"admin_email"`
	MailSender          string `json:"mail_sender"`
	OIDCLogin           bool   `json:"oidc_login"`
	// HostName is the app's host name under the domain (x-hostname): the server's name to
	// other servers, so the schema warns against changing it once it federates.
	HostName string `json:"host_name"`
}

const (
	appKey           = "app-key"
	adminPassword    = "admin-password"
	mediaBucket      = "media"
	mediaKey         = "app"
	oidcRedirectPath = "/auth/oidc/callback"
	storagePath      = "/var/www/storage"
)

type pixelfed struct {
	*appkit.Base
}

func newPixelfed() *pixelfed {
	return &pixelfed{Base: appkit.NewBase(
		appkit.MustOptions(schemaJSON),
		pinned,
		// Pixelfed is 0.x: a minor release (0.11 to 0.12) changes the schema and the
		// upgrade notes assume the minor before.
		app.VersionGuard{Version: version, MaxStep: app.StepMinor, OnDowngrade: app.DowngradeRefuse},
		[]app.RoleGroup{
			{Name: "application-admins", Description: "Pixelfed admin in every application of the deployment. The first administrator is a member.", Roles: []string{"admin"}},
			{Name: "pixelfed-admins", Description: "Pixelfed admin. The first administrator is not a member.", Roles: []string{"admin"}},
		},
	)}
}

func (p *pixelfed) Requests(_ context.Context, req app.RequestsRequest) ([]app.ResourceRequest, error) {
	return appkit.Requests(req, p.Options, p.requests)
}

func (p *pixelfed) requests(c config, domain string) []app.ResourceRequest {
	reqs := []app.ResourceRequest{
		appkit.Request("secrets", contract.Secret, contract.SecretRequest{Files: map[string]contract.SecretFile{
			// php artisan key:generate: 32 random bytes, base64, used as "base64:...".
			appKey:        {Generate: &contract.Generate{Length: 32, Encoding: "base64"}},
			adminPassword: {Generate: &contract.Generate{Length: 24, Encoding: "alphanumeric"}},
		}}),
		appkit.Request("db", contract.PostgreSQL, contract.PostgreSQLRequest{}),
		appkit.Request("cache", contract.Redis, contract.RedisRequest{}),
		appkit.Request("media", contract.S3, contract.S3Request{
			// Posts link media directly, here and on other servers.
			Buckets: map[string]contract.S3Bucket{mediaBucket: {PublicRead: true, CORS: []contract.S3CORS{{
				AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"},
			}}}},
			Keys: map[string]contract.S3Key{mediaKey: {Grants: map[string]string{mediaBucket: "owner"}}},
		}),
		appkit.Request("mail", contract.SMTP, contract.SMTPRequest{Sender: c.MailSender, Domain: domain}),
	}
	if c.OIDCLogin {
		reqs = append(reqs, appkit.SSO("Pixelfed", oidcRedirectPath, p.GroupNames())...)
	}
	return reqs
}

func (p *pixelfed) Render(_ context.Context, req app.RenderRequest) ([]app.Node, error) {
	domain := req.Domain
	in, err := appkit.Prepare(req, p.Options, p.requests)
	if err != nil {
		return nil, err
	}
	c, res := in.Config, in.Results
	secrets, db, cache, media, mail := in.Secrets, in.DB, in.Cache, in.Media, in.Mail
	if err := appkit.RequireFiles(secrets, appKey, adminPassword); err != nil {
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
	publicURL, err := bucketURL(media, bucket)
	if err != nil {
		return nil, appkit.InvalidResult("media", "has an endpoint that is not a URL")
	}
	var sso *contract.OIDCResult
	if c.OIDCLogin {
		sso = &contract.OIDCResult{}
		if err := res.Decode("sso", sso); err != nil {
			return nil, err
		}
	}
	host := appkit.Host(c.HostName, domain)
	mailEncryption := map[string]string{"tls": "ssl", "starttls": "tls", "none": "null"}[mail.TLS]

	laravel := func(n *appkit.Node) {
		// The image's entrypoint (migrations, caches, keys) runs from the start script,
		// once the secrets are in the environment.
		n.Env("ENTRYPOINT_SKIP", "1").
			Env("APP_NAME", c.AppName).
			Env("APP_ENV", "production").
			Env("APP_DEBUG", "false").
			Env("APP_URL", "https://"+host).
			Env("APP_DOMAIN", host).
			Env("ADMIN_DOMAIN", host).
			Env("SESSION_DOMAIN", host).
			Env("TRUST_PROXIES", "*").
			Env("APP_LOCALE", c.DefaultLanguage).
			Env("APP_FALLBACK_LOCALE", "en").
			SecretEnvPrefixed("APP_KEY", "base64:", secrets.Files[appKey].Ref).
			Env("INSTANCE_DESCRIPTION", c.InstanceDescription).
			Env("INSTANCE_CONTACT_EMAIL", c.ContactEmail).
			Env("OPEN_REGISTRATION", appkit.Bool(c.Registrations == "open")).
			Env("INSTANCE_CUR_REG", appkit.Bool(c.Registrations == "approval")).
			Env("ENFORCE_EMAIL_VERIFICATION", appkit.Bool(c.EnforceEmail)).
			Env("PF_ENFORCE_MAX_USERS", appkit.Bool(c.MaxUsers > 0)).
			Env("PF_MAX_USERS", strconv.Itoa(c.MaxUsers)).
			Env("MAX_PHOTO_SIZE", strconv.Itoa(c.MaxPhotoSizeKB)).
			Env("MAX_CAPTION_LENGTH", strconv.Itoa(c.MaxCaptionLength)).
			Env("MAX_ALBUM_LENGTH", strconv.Itoa(c.MaxAlbumLength)).
			Env("LIMIT_ACCOUNT_SIZE", appkit.Bool(c.AccountSizeLimitKB > 0)).
			Env("MAX_ACCOUNT_SIZE", strconv.Itoa(c.AccountSizeLimitKB)).
			Env("IMAGE_QUALITY", strconv.Itoa(c.ImageQuality)).
			Env("ACTIVITY_PUB", appkit.Bool(c.Federation)).
			Env("AP_REMOTE_FOLLOW", appkit.Bool(c.Federation)).
			Env("AP_INBOX", appkit.Bool(c.Federation)).
			Env("AP_OUTBOX", appkit.Bool(c.Federation)).
			Env("AP_SHAREDINBOX", appkit.Bool(c.Federation)).
			Env("OAUTH_ENABLED", appkit.Bool(c.MobileApps)).
			Env("DB_CONNECTION", "pgsql").
			Env("DB_HOST", db.Host).
			Env("DB_PORT", strconv.Itoa(db.Port)).
			Env("DB_DATABASE", db.Database).
			Env("DB_USERNAME", db.User).
			SecretEnv("DB_PASSWORD", db.Password.Secret).
			Env("DB_APPLY_NEW_MIGRATIONS_AUTOMATICALLY", "true").
			Env("REDIS_CLIENT", "phpredis").
			Env("REDIS_SCHEME", "tcp").
			Env("REDIS_HOST", cache.Host).
			Env("REDIS_PORT", strconv.Itoa(cache.Port)).
			Env("REDIS_USERNAME", cache.User).
			// The Redis ACL limits the user to its key prefix.
			Env("REDIS_PREFIX", cache.KeyPrefix).
			Env("HORIZON_PREFIX", cache.KeyPrefix+"horizon:").
			SecretEnv("REDIS_PASSWORD", cache.Password.Secret).
			Env("CACHE_DRIVER", "redis").
			Env("QUEUE_DRIVER", "redis").
			Env("SESSION_DRIVER", "redis").
			Env("BROADCAST_DRIVER", "log").
			Env("MAIL_DRIVER", "smtp").
			Env("MAIL_MAILER", "smtp").
			Env("MAIL_HOST", mail.Host).
			Env("MAIL_PORT", strconv.Itoa(mail.Port)).
			Env("MAIL_USERNAME", mail.User).
			Env("MAIL_ENCRYPTION", mailEncryption).
			Env("MAIL_FROM_ADDRESS", mail.From).
			Env("MAIL_FROM_NAME", c.AppName).
			SecretEnv("MAIL_PASSWORD", mail.Password.Secret).
			Env("PF_ENABLE_CLOUD", "true").
			Env("FILESYSTEM_CLOUD", "s3").
			Env("AWS_ACCESS_KEY_ID", key.AccessKeyID).
			SecretEnv("AWS_SECRET_ACCESS_KEY", key.SecretAccessKey.Secret).
			Env("AWS_DEFAULT_REGION", media.Region).
			Env("AWS_BUCKET", bucket).
			Env("AWS_URL", publicURL).
			Env("AWS_ENDPOINT", media.Endpoint).
			Env("AWS_USE_PATH_STYLE_ENDPOINT", appkit.Bool(media.PathStyle)).
			Env("PF_OIDC_ENABLED", appkit.Bool(sso != nil)).
			// Uploads wait in storage until a Horizon job moves them to the bucket: the web
			// and worker nodes share this volume, as in Pixelfed's Docker setup.
			Volume("storage", storagePath)
		if sso != nil {
			n.Env("FEDHOST_OIDC_ISSUER", sso.Issuer).
				Env("PF_OIDC_CLIENT_ID", sso.ClientID).
				Env("PF_OIDC_SCOPES", "openid profile email").
				Env("PF_OIDC_USERNAME_FIELD", "preferred_username").
				Env("PF_OIDC_FIELD_ID", "sub").
				SecretEnv("PF_OIDC_CLIENT_SECRET", sso.ClientSecret.Secret).
				// Pixelfed wants the endpoints, not the issuer: read them from discovery.
				Shell(`eval "$(php -r '$d = json_decode(file_get_contents(rtrim(getenv("FEDHOST_OIDC_ISSUER"), "/") . "/.well-known/openid-configuration"), true); foreach (["authorization_endpoint" => "PF_OIDC_AUTHORIZE_URL", "token_endpoint" => "PF_OIDC_TOKEN_URL", "userinfo_endpoint" => "PF_OIDC_PROFILE_URL", "end_session_endpoint" => "PF_OIDC_LOGOUT_URL"] as $k => $v) { if (isset($d[$k])) { echo "export " . $v . "=" . escapeshellarg($d[$k]) . "\n"; } }')"`)
		}
	}

	web := appkit.NewNode("web", p.Image("web"))
	laravel(web)
	web.Shell(`export ENTRYPOINT_SKIP=0`).
		Command("/docker/entrypoint.sh", "apache2-foreground").
		Port("http").
		Health("http", "/api/service/health-check", 900)

	worker := appkit.NewNode("worker", p.Image("worker"))
	laravel(worker)
	worker.SecretEnv("FEDHOST_ADMIN_PASSWORD", secrets.Files[adminPassword].Ref).
		Env("FEDHOST_ADMIN_USERNAME", c.AdminUsername).
		Env("FEDHOST_ADMIN_EMAIL", c.AdminEmail).
		// The web node migrates the database; create the administrator once it has.
		Shell(`if [ -n "$FEDHOST_ADMIN_EMAIL" ]; then i=0; until php artisan migrate:status >/dev/null 2>&1 || [ "$i" -ge 90 ]; do i=$((i+1)); sleep 10; done; gosu www-data php artisan user:create --name="$FEDHOST_ADMIN_USERNAME" --username="$FEDHOST_ADMIN_USERNAME" --email="$FEDHOST_ADMIN_EMAIL" --password="$FEDHOST_ADMIN_PASSWORD" --is_admin=1 --confirm_email=1 --no-interaction >/dev/null 2>&1 || true; fi`).
		Command("gosu", "www-data", "php", "artisan", "horizon")

	return appkit.Nodes(web, worker)
}

// bucketURL is the public URL of the bucket's objects.
func bucketURL(media contract.S3Result, bucket string) (string, error) {
	u, err := url.Parse(media.Endpoint)
	if err != nil || u.Host == "" {
		return "", err
	}
	if media.PathStyle {
		u.Path = "/" + bucket
	} else {
		u.Host = bucket + "." + u.Host
	}
	return u.String(), nil
}

var (
	_ app.App         = (*pixelfed)(nil)
	_ app.Guarded     = (*pixelfed)(nil)
	_ app.Operator    = (*pixelfed)(nil)
	_ app.RoleGrouper = (*pixelfed)(nil)
)
