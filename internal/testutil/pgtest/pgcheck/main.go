// Command pgcheck prints one line saying whether the PostgreSQL tests will
// run or skip, and why; `make test` runs it first because go test shows
// nothing of a package that passes, skipped tests included. It exits 1
// when WEIR_TEST_POSTGRES=required and PostgreSQL cannot be reached.
package main

import (
	"fmt"
	"os"

	"github.com/weirhq/weir/internal/testutil/pgtest"
)

func main() {
	line, err := pgtest.Status()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(line)
}
