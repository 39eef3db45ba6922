package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Redact is the DSN as bindery shows it: the server, user and database,
// never the password (nor anything else a DSN can carry: an unparseable DSN
// is shown as such, not echoed).
func Redact(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
}
