// Command fs is weir's file plugin: fs.read, fs.list and fs.write, confined
// to one directory tree (the "root" of its configuration; by default
// "files" in its state directory). Paths are relative to the root; a path
// that leaves it, through ".." or a symbolic link, is refused (os.Root).
//
// fs.write is idempotent on (path, content hash) through the idempotency
// key: a retry of the same logical write returns the first result without
// writing again, so it cannot overwrite what happened to the file since.
package main

import (
	"encoding/json"

	"github.com/weirhq/weir/sdk"
)

// configSchema is the plugin's config section, declared in its manifest
// so that weir refuses a key this plugin does not read with its file:line.
const configSchema = `{"type":"object","additionalProperties":false,"properties":{
	"root":{"type":"string"},
	"max_read_bytes":{"type":"integer","minimum":1},
	"max_write_bytes":{"type":"integer","minimum":1},
	"max_entries":{"type":"integer","minimum":1}}}`

func main() {
	sdk.ServeWith(sdk.Options{Name: "fs", ConfigSchema: configSchema,
		Tools: func(json.RawMessage) ([]sdk.Tool, error) { return tools(), nil }})
}
