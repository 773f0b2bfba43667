// Package codegen is a local stand-in for
// github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3/codegen, which the Go module proxy
// refuses (403 "This module version is not available." for v3.107.1, the version
// pulumi-terraform-bridge v3.133.0 requires). The bridge's schema generator (tfgen) imports it for
// two things only: the C# "language" blocks it writes into the schema (three plain info structs,
// reproduced here with the same JSON names, so the schema is the same as upstream's) and translating
// Terraform documentation examples into C# programs (never taken: the setup runs tfgen with
// --skip-examples, and GenerateProgram here only reports that it is unavailable). The provider binary
// does not link this package at all.
package codegen

import (
	"errors"

	"github.com/hashicorp/hcl/v2"
	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
)

// CSharpPackageInfo is the package-level "language.csharp" block of a Pulumi schema.
type CSharpPackageInfo struct {
	PackageReferences            map[string]string `json:"packageReferences,omitempty"`
	Namespaces                   map[string]string `json:"namespaces,omitempty"`
	Compatibility                string            `json:"compatibility,omitempty"`
	DictionaryConstructors       bool              `json:"dictionaryConstructors,omitempty"`
	ProjectReferences            []string          `json:"projectReferences,omitempty"`
	RootNamespace                string            `json:"rootNamespace,omitempty"`
	LiftSingleValueMethodReturns bool              `json:"liftSingleValueMethodReturns,omitempty"`
	RespectSchemaVersion         bool              `json:"respectSchemaVersion,omitempty"`
}

// CSharpResourceInfo is a resource's "language.csharp" block (a C# class name override).
type CSharpResourceInfo struct {
	Name string `json:"name,omitempty"`
}

// CSharpPropertyInfo is a property's "language.csharp" block (a C# property name override).
type CSharpPropertyInfo struct {
	Name string `json:"name,omitempty"`
}

// GenerateProgram always fails: C# example generation is not part of this build.
func GenerateProgram(*pcl.Program) (map[string][]byte, hcl.Diagnostics, error) {
	return nil, nil, errors.New("C# program generation is not available in this build (pulumi-dotnet stub)")
}
