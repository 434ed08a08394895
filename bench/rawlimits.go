package main

// rawLimits is scenario 1: the physical limits themselves, each beside the
// one below it (a commit rate beside the fsync rate, 16 callers beside one).
func rawLimits(b *bench) ([]row, error) {
	var rows []row
	fsync, err := b.fsyncRate()
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{figure: "fsync, 64 B appends", value: perSec(fsync)})

	for _, w := range []int{1, commitWriters} {
		r, err := b.badgerSync(w)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row{figure: "Badger SyncWrites commits, " + plural(w, "writer"), value: perSec(r),
			limit: "fsync " + perSec(fsync), ratio: ratio(r / fsync)})
	}

	g, err := b.groupCommit()
	if err != nil {
		return rows, err
	}
	rows = append(rows, row{figure: "group commit (Store.Update), 64 writers", value: perSec(g),
		limit: "fsync " + perSec(fsync), ratio: ratio(g / fsync)})

	one, err := b.rawEchoCalls(1)
	if err != nil {
		return rows, err
	}
	many, err := b.rawEchoCalls(echoFanCallers)
	if err != nil {
		return rows, err
	}
	rows = append(rows,
		row{figure: "raw go-plugin gRPC echo p50, 1 caller, 100 B", value: dur(one.Quantile(0.5))},
		row{figure: "raw go-plugin gRPC echo, 1 caller", value: perSec(one.PerSec())},
		row{figure: "raw go-plugin gRPC echo, 16 callers", value: perSec(many.PerSec()),
			limit: "1 caller " + perSec(one.PerSec()), ratio: ratio(many.PerSec() / one.PerSec())},
	)
	return rows, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return thousands(float64(n)) + " " + word + "s"
}
