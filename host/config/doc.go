// Package config reads the configuration of `fedhost serve` and the other fedhost
// commands.
//
// A setting comes from, in increasing precedence: the embedded default, the
// configuration file (fedhost.hcl, HCL syntax), the environment (FEDHOST_<NAME>, e.g.
// FEDHOST_DATA_DIR) and the command-line flags that were set explicitly (--data-dir).
// The file is optional: without one, fedhost runs the embedded default, a single
// machine with SQLite, embedded secrets, local instances and managed PostgreSQL and S3
// services in the data directory.
//
// The file also describes the hosting provider's environment: one resource block per
// resource type, naming the provider plugin that answers it with the provider's
// settings and limits, one registrar block per registrar driver, and an app block per app
// plugin that takes settings:
//
//	listen   = "127.0.0.1:8080"
//	data_dir = "./data"
//	database = "sqlite"
//
//	resource "postgresql" {
//	  provider = "postgresql"
//	  settings = { managed = true }
//	}
//	registrar "porkbun" {
//	  settings = { api_key_secret = "registrar/porkbun/key" }
//	}
//	app "hello" {
//	  settings = { footer = "Hosted by Example" }
//	}
//
// Settings and limits are free-form HCL objects; they reach the plugins as JSON. Every
// error names the file position, environment variable or flag it comes from, and never
// shows the value of the database setting, which may hold a password.
package config
