package badgerstore

import "github.com/weirhq/weir/runtime/store"

func (t *storeTx) ServiceLeaseGet(name string) (*store.ServiceLease, error) {
	return getOne[store.ServiceLease](t, key(pService, name))
}

func (t *storeTx) ServiceLeasePut(l *store.ServiceLease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := checkID("service lease name", l.Name); err != nil {
		return err
	}
	return t.putJSON(key(pService, l.Name), l)
}
