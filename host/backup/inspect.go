package backup

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// maxInspected bounds the tables Inspect counts the rows of.
const maxInspected = 1000

// Contents is what a restored database holds: its tables outside PostgreSQL's own
// schemas and their rows.
type Contents struct {
	Tables int
	Rows   int64
}

// Inspect counts the tables of db and their rows, as a restore drill checks a restored
// backup: a database with no table restored nothing. Rows are counted exactly, in the
// first maxInspected tables by name.
func Inspect(ctx context.Context, db *Database) (Contents, error) {
	c, err := inspect(ctx, db)
	return c, hide(err, db.Password)
}

func inspect(ctx context.Context, db *Database) (Contents, error) {
	if err := db.validate(); err != nil {
		return Contents{}, err
	}
	sslmode := db.SSLMode
	if sslmode == "" {
		sslmode = "prefer"
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s sslmode=%s connect_timeout=30 application_name=fedhost-drill",
		quoteConninfo(db.Host), db.Port, quoteConninfo(db.Database), quoteConninfo(db.User), quoteConninfo(db.Password), quoteConninfo(sslmode)))
	if err != nil {
		return Contents{}, fmt.Errorf("the connection to database %s: %w", db.Database, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Contents{}, fmt.Errorf("connecting to database %s at %s: %w", db.Database, net.JoinHostPort(db.Host, strconv.Itoa(db.Port)), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
		ORDER BY table_schema, table_name`)
	if err != nil {
		return Contents{}, fmt.Errorf("listing the tables of %s: %w", db.Database, err)
	}
	type table struct{ schema, name string }
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		return t, r.Scan(&t.schema, &t.name)
	})
	if err != nil {
		return Contents{}, fmt.Errorf("listing the tables of %s: %w", db.Database, err)
	}
	out := Contents{Tables: len(tables)}
	for i, t := range tables {
		if i == maxInspected {
			break
		}
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t.schema, t.name}.Sanitize()).Scan(&n); err != nil {
			return Contents{}, fmt.Errorf("counting the rows of %s.%s in %s: %w", t.schema, t.name, db.Database, err)
		}
		out.Rows += n
	}
	return out, nil
}
