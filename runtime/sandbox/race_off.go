//go:build !race

package sandbox

// raceBuild: see race_on.go.
const raceBuild = false
