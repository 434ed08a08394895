// Command fs is weir's file plugin: fs.read, fs.list and fs.write, confined
// to one directory tree (the "root" of its configuration; by default
// "files" in its state directory). Paths are relative to the root; a path
// that leaves it, through ".." or a symbolic link, is refused (os.Root).
//
// fs.write is idempotent on (path, content hash) through the idempotency
// key: a retry of the same logical write returns the first result without
// writing again, so it cannot overwrite what happened to the file since.
package main

import "github.com/weirhq/weir/sdk"

func main() {
	sdk.Serve(tools()...)
}
