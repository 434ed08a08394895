package memstore

import "github.com/weirhq/weir/runtime/store"

func (t *tx) ServiceLeaseGet(name string) (*store.ServiceLease, error) {
	return get[store.ServiceLease](t, tService, name)
}

func (t *tx) ServiceLeasePut(l *store.ServiceLease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("service lease name", l.Name); err != nil {
		return err
	}
	return put(t, tService, l.Name, l)
}
