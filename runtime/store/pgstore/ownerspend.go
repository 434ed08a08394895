package pgstore

import "github.com/weirhq/weir/runtime/store"

func (t *storeTx) OwnerSpendAdd(s store.OwnerSpend) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckOwnerSpend(s); err != nil {
		return err
	}
	t.put(`INSERT INTO owner_spend (owner, minute, host, cost) VALUES ($1, $2, $3, $4)
		ON CONFLICT (owner, minute, host) DO UPDATE SET cost = owner_spend.cost + excluded.cost`,
		s.Owner, s.Minute, s.Host, s.Cost)
	return nil
}

func (t *storeTx) OwnerSpendList(p store.OwnerSpendListParams) ([]store.OwnerSpend, error) {
	if err := t.Open(); err != nil {
		return nil, err
	}
	sql, args := `SELECT owner, minute, host, cost FROM owner_spend WHERE minute >= $1 ORDER BY owner, minute, host`, []any{p.Since}
	if p.Owner != "" {
		if !text(p.Owner) {
			return nil, nil
		}
		sql, args = `SELECT owner, minute, host, cost FROM owner_spend WHERE owner = $1 AND minute >= $2 ORDER BY minute, host`, []any{p.Owner, p.Since}
	}
	rows, err := t.query(sql, args...)
	if err != nil {
		return nil, t.fail(err)
	}
	defer rows.Close()
	var out []store.OwnerSpend
	for rows.Next() {
		var s store.OwnerSpend
		if err := rows.Scan(&s.Owner, &s.Minute, &s.Host, &s.Cost); err != nil {
			return nil, t.fail(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(err)
	}
	return out, nil
}

func (t *storeTx) OwnerSpendPrune(before int64) (int, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	n, err := t.exec(`DELETE FROM owner_spend WHERE minute < $1`, before)
	return int(n), err
}
