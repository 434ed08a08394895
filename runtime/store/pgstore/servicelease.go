package pgstore

import "github.com/weirhq/weir/runtime/store"

func (t *storeTx) ServiceLeaseGet(name string) (*store.ServiceLease, error) {
	return getOne[store.ServiceLease](t, []string{name}, `SELECT v, data FROM service_leases WHERE name = $1`, name)
}

func (t *storeTx) ServiceLeasePut(l *store.ServiceLease) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := store.CheckID("service lease name", l.Name); err != nil {
		return err
	}
	return t.putRecord("svl\x00"+l.Name, l, `INSERT INTO service_leases (name, v, data) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET v = excluded.v, data = excluded.data`, l.Name)
}
