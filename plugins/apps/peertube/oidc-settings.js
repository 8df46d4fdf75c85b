// Writes the settings of the auth-openid-connect plugin from fedhost's configuration at
// every start. PeerTube keeps plugin settings in its database, not in its config files.
const { Client } = require('/app/node_modules/pg')

const env = process.env
const settings = {
  'auth-display-name': 'Single sign-on',
  'discover-url': env.FEDHOST_OIDC_ISSUER.replace(/\/$/, '') + '/.well-known/openid-configuration',
  'client-id': env.FEDHOST_OIDC_CLIENT_ID,
  'client-secret': env.FEDHOST_OIDC_CLIENT_SECRET,
  'scope': 'openid email profile groups',
  'username-property': 'preferred_username',
  'mail-property': 'email',
  'display-name-property': 'name',
  'role-property': 'peertube_role',
  'group-property': 'groups',
  'allowed-group': ''
}
const client = new Client({
  host: env.PEERTUBE_DB_HOSTNAME,
  port: Number(env.PEERTUBE_DB_PORT),
  database: env.PEERTUBE_DB_NAME,
  user: env.PEERTUBE_DB_USERNAME,
  password: env.PEERTUBE_DB_PASSWORD,
  ssl: env.PEERTUBE_DB_SSL === 'true' ? { rejectUnauthorized: false } : false
})
client.connect()
  .then(() => client.query('UPDATE "plugin" SET "settings" = $1 WHERE "name" = $2 AND "type" = 1',
    [JSON.stringify(settings), 'auth-openid-connect']))
  .then((r) => {
    if (r.rowCount === 0) console.error('fedhost: the auth-openid-connect plugin is not installed yet; single sign-on starts with the next start')
  })
  .catch((e) => console.error('fedhost: single sign-on settings not written: ' + e.message))
  .finally(() => client.end())
