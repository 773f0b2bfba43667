// Package java is a local stand-in for github.com/pulumi/pulumi-java/pkg/codegen/java, which the Go
// module proxy refuses (403 "This module version is not available." for v1.30.0, the version
// pulumi-terraform-bridge v3.133.0 requires). The bridge's schema generator (tfgen) imports it only
// to translate Terraform documentation examples into Java programs (and for `pulumi convert`). The
// setup runs tfgen with --skip-examples, so this code path is never taken, and the provider binary
// does not link this package at all. It provides just the one symbol tfgen references; called, it
// reports that Java program generation is unavailable (tfgen then drops that example).
package java

import (
	"errors"

	"github.com/hashicorp/hcl/v2"
	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
)

// GenerateProgram always fails: Java example generation is not part of this build.
func GenerateProgram(*pcl.Program) (map[string][]byte, hcl.Diagnostics, error) {
	return nil, nil, errors.New("Java program generation is not available in this build (pulumi-java stub)")
}
