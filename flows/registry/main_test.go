package registry

import (
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
