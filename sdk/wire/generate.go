package wire

// The generated code is checked in so that building weir or a plugin never
// needs protoc. Regenerate with `make generate` after editing plugin.proto
// (needs protoc, protoc-gen-go and protoc-gen-go-grpc on the PATH).
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
