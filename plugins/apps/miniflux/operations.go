package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/app"
)

// The operations that run as Miniflux's own command line in the node (miniflux -h): the
// binary reads DATABASE_URL_FILE from the node's environment, so the database password
// never passes through the host.
const (
	opCreateUser    = "create-user"
	opResetPassword = "reset-password"
	opRefreshFeeds  = "refresh-feeds"
	opExportOPML    = "export-opml"
	opFlushSessions = "flush-sessions"
	opCleanup       = "run-cleanup-tasks"
)

// A username or password goes to Miniflux on a line of its terminal: neither may hold a
// line break, or a username could carry the password line.
const (
	usernameSchema = `{"type": "string", "title": "Username", "minLength": 1, "maxLength": 255, "pattern": "^[^\\s]+$"}`
	passwordSchema = `{"type": "string", "title": "Password", "writeOnly": true, "minLength": 6, "maxLength": 1024, "pattern": "^[^\\r\\n]+$"}`
)

func inputSchema(properties string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Input", "type": "object", "additionalProperties": false, "properties": {` +
		properties + `}, "required": ` + string(req) + `}`)
}

func (miniflux) Operations(context.Context) ([]app.Operation, error) {
	return []app.Operation{
		{Name: "backup", Title: "Back up", Description: "Dump the Miniflux database into the deployment's backups bucket"},
		{Name: "restore", Title: "Restore", Description: "Restore the Miniflux database from a chosen backup"},
		{
			Name: opCreateUser, Title: "Create a user",
			Description: "Create a Miniflux user who signs in with this username and password, an administrator or not",
			Input: inputSchema(`"username": `+usernameSchema+`, "password": `+passwordSchema+`,
				"admin": {"type": "boolean", "title": "Administrator", "default": true}`, "username", "password"),
			NeedsRunning: true,
		},
		{
			Name: opResetPassword, Title: "Reset a user's password",
			Description: "Give a user a new password and sign them out everywhere",
			Input:       inputSchema(`"username": `+usernameSchema+`, "password": `+passwordSchema, "username", "password"),
			Idempotent:  true, NeedsRunning: true,
		},
		{
			Name: opRefreshFeeds, Title: "Refresh all feeds",
			Description: "Fetch every feed of every user now, besides the polling schedule",
			Idempotent:  true, NeedsRunning: true, TimeoutSeconds: 900,
		},
		{
			Name: opExportOPML, Title: "Export a user's feeds",
			Description: "Export the feeds of a user as an OPML document",
			Input:       inputSchema(`"username": `+usernameSchema, "username"),
			OutputFile:  "feeds.opml",
			Idempotent:  true, NeedsRunning: true, Concurrent: true,
		},
		{
			Name: opFlushSessions, Title: "Sign everyone out",
			Description: "Flush all sessions: every user signs in again",
			Idempotent:  true, NeedsRunning: true,
		},
		{
			Name: opCleanup, Title: "Run the cleanup tasks",
			Description: "Archive old entries and remove expired sessions now, besides the daily schedule",
			Idempotent:  true, NeedsRunning: true, TimeoutSeconds: 900,
		},
	}, nil
}

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Admin    *bool  `json:"admin"`
}

// Command renders an operation as Miniflux's command line in the web node. The terminal
// ones (-create-admin, -reset-password) read the username and the password from a
// terminal only: they get them on stdin, never in args.
func (miniflux) Command(_ context.Context, req app.CommandRequest) (app.Command, error) {
	var in credentials
	if len(req.Input) > 0 {
		if err := json.Unmarshal(req.Input, &in); err != nil {
			return app.Command{}, sdk.Invalid("input", "the input of %s is not an object of strings: %v", req.Operation, err)
		}
	}
	cmd := app.Command{Node: "web"}
	switch req.Operation {
	case opCreateUser, opResetPassword:
		if err := checkLine("input/username", in.Username); err != nil {
			return app.Command{}, err
		}
		if err := checkLine("input/password", in.Password); err != nil {
			return app.Command{}, err
		}
		if req.Operation == opCreateUser && in.Admin != nil && !*in.Admin {
			return createUserByAPI(in)
		}
		flag := "-create-admin"
		if req.Operation == opResetPassword {
			flag = "-reset-password"
		}
		var stdin bytes.Buffer
		stdin.WriteString(in.Username + "\n" + in.Password + "\n")
		cmd.Args, cmd.Stdin, cmd.TTY = []string{flag}, stdin.Bytes(), true
	case opExportOPML:
		if err := checkLine("input/username", in.Username); err != nil {
			return app.Command{}, err
		}
		cmd.Args = []string{"-export-user-feeds=" + in.Username}
	case opRefreshFeeds:
		cmd.Args = []string{"-refresh-feeds"}
	case opFlushSessions:
		cmd.Args = []string{"-flush-sessions"}
	case opCleanup:
		cmd.Args = []string{"-run-cleanup-tasks"}
	default:
		return app.Command{}, sdk.Errorf(sdk.CodeUnsupported, "operation %s is run by the host, not as a command", req.Operation)
	}
	// The command's own lines on stdout, its log on stderr, in words.
	cmd.Env = map[string]string{"LOG_FORMAT": "text", "LOG_FILE": "stderr"}
	return cmd, nil
}

// createUserByAPI renders create-user for a user who is not an administrator, whom
// Miniflux's command line cannot make (-create-admin makes administrators only): the
// fedhost-miniflux-api artifact makes them through Miniflux's REST API in the web node,
// as the node's administrator, so that password never leaves the node. The new user's
// name and password travel on stdin, on no command line of the machine.
func createUserByAPI(in credentials) (app.Command, error) {
	stdin, err := json.Marshal(map[string]any{"create_user": map[string]string{"username": in.Username, "password": in.Password}})
	if err != nil {
		return app.Command{}, err
	}
	return app.Command{Node: "web", Binary: apiBinary, Stdin: stdin}, nil
}

func checkLine(field, v string) error {
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return sdk.Invalid(field, "give a value on one line")
	}
	return nil
}

var _ app.Commander = miniflux{}

// apiBinary is the artifact that calls Miniflux's REST API in the web node
// (cmd/fedhost-miniflux-api), built beside the miniflux binary.
var apiBinary = "fedhost-miniflux-api"

// RoleSync makes the members of the administrator group (oidc.adminGroup) Miniflux
// administrators and every other user not: Miniflux itself sets is_admin only when a
// user signs in, so a user taken out of the group would stay an administrator until then.
// The command runs in the web node, where it signs in with the node's admin credentials.
func (miniflux) RoleSync(_ context.Context, req app.CommandRequest, in app.RoleSyncInput) (app.Command, error) {
	c, err := parse(req.Config)
	if err != nil {
		return app.Command{}, err
	}
	group := c.OIDC.AdminGroup
	if group == "" {
		group = defaults().OIDC.AdminGroup
	}
	admins := in.Members[group]
	if admins == nil {
		admins = []string{}
	}
	stdin, err := json.Marshal(map[string][]string{"admins": admins})
	if err != nil {
		return app.Command{}, err
	}
	return app.Command{Node: "web", Binary: apiBinary, Stdin: stdin}, nil
}

var _ app.RoleSyncer = miniflux{}
