package daemon

import (
	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// classifyStorage is the API's Classify: a full or failing state folder is
// answered as what it is, naming the folder, instead of "internal". The
// failed call's transaction rolled back whole (nothing half-recorded), and
// the next call after space is freed succeeds: nothing to reset.
func (d *daemon) classifyStorage(err error) *api.Error {
	folder := dirOf(d.cfg.Database)
	switch db.FaultOf(err) {
	case db.FaultFull:
		return api.Errorf(api.CodeStorageFull, "bindery's state folder %s is full (%v): nothing of this call was recorded; free space there and retry (bindery recovers by itself)", folder, err)
	case db.FaultIO:
		return api.Errorf(api.CodeStorageFailed, "bindery cannot use its state folder %s (%v): nothing of this call was recorded", folder, err)
	}
	return nil
}
