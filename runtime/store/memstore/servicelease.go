package memstore

import "github.com/weirhq/weir/runtime/store"

func (t *tx) ServiceLeaseGet(name string) (*store.ServiceLease, error) {
	return get[store.ServiceLease](t, tService, name)
}

func (t *tx) ServiceLeasePut(l *store.ServiceLease) error {
	return putChecked(t, tService, l.Name, l, func(l *store.ServiceLease) error { return checkID("service lease name", l.Name) })
}
