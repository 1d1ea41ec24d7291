package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A named lease is held in the settings table, so that processes on any
// machine that shares the index see it: held by one holder until a time,
// renewed while it works, free once that time passes (its holder died) or
// it is released. Taken counts the times it was taken, over the store's
// life.
type namedLease struct {
	Holder string `json:"holder,omitempty"`
	Until  int64  `json:"until"`
	Taken  int64  `json:"taken"`
}

func leaseSetting(name string) string { return "lease:" + name }

// TryLease takes the lease name for holder until ttl from now, and reports
// true, unless another holder has it and its time has not passed; a holder
// that has it already renews it.
func (x *Index) TryLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	return x.changeLease(ctx, name, holder, func(l *namedLease, now time.Time) bool {
		if l.Holder != "" && l.Holder != holder && l.Until > now.UnixNano() {
			return false
		}
		if l.Holder != holder || l.Until <= now.UnixNano() {
			l.Taken++
		}
		l.Holder, l.Until = holder, now.Add(ttl).UnixNano()
		return true
	})
}

// ReleaseLease frees the lease name if holder has it. With unused, the
// taking is not counted: the holder found nothing to do with it.
func (x *Index) ReleaseLease(ctx context.Context, name, holder string, unused bool) error {
	_, err := x.changeLease(ctx, name, holder, func(l *namedLease, _ time.Time) bool {
		if l.Holder != holder {
			return false
		}
		l.Holder, l.Until = "", 0
		if unused && l.Taken > 0 {
			l.Taken--
		}
		return true
	})
	return err
}

// LeaseTaken counts the times the lease name was taken.
func (x *Index) LeaseTaken(ctx context.Context, name string) (int64, error) {
	v, ok, err := x.Setting(ctx, leaseSetting(name))
	if err != nil || !ok {
		return 0, err
	}
	var l namedLease
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return 0, fmt.Errorf("lease %s: %w", name, err)
	}
	return l.Taken, nil
}

// changeLease reads the lease, lets change decide and change it, and
// writes it back in the same transaction when change says so.
func (x *Index) changeLease(ctx context.Context, name, holder string, change func(*namedLease, time.Time) bool) (bool, error) {
	key := leaseSetting(name)
	var ok bool
	err := x.write(ctx, func(tx *sql.Tx) error {
		ok = false
		var l namedLease
		var v string
		// The row is made first, so that two first takers on PostgreSQL
		// wait for each other on its lock instead of both inserting.
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, '{"until":0,"taken":0}')
			ON CONFLICT (name) DO NOTHING`, key); err != nil {
			return err
		}
		q := `SELECT value FROM settings WHERE name = ?`
		if x.pg {
			q += ` FOR UPDATE`
		}
		switch err := tx.QueryRowContext(ctx, q, key).Scan(&v); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal([]byte(v), &l); err != nil {
				return fmt.Errorf("damaged: %w", err)
			}
		}
		if !change(&l, x.now()) {
			return nil
		}
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		ok = true
		_, err = tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, key, string(b))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return ok, nil
}
