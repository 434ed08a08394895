package badgerstore

import "github.com/weirhq/weir/runtime/store"

func (t *storeTx) ServiceLeaseGet(name string) (*store.ServiceLease, error) {
	return getOne[store.ServiceLease](t, key(pService, name))
}

func (t *storeTx) ServiceLeasePut(l *store.ServiceLease) error {
	return putChecked(t, key(pService, l.Name), l, func(l *store.ServiceLease) error { return checkID("service lease name", l.Name) })
}
