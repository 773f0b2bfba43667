//go:build tools

// Package tools pins the Python language host's main package so `go mod tidy` resolves all its dependencies.
package tools

import _ "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
