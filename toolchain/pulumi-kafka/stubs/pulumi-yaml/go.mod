// Local stand-in for github.com/pulumi/pulumi-yaml (see pkg/pulumiyaml/codegen/codegen.go).
module github.com/pulumi/pulumi-yaml

go 1.25.9

require (
	github.com/hashicorp/hcl/v2 v2.24.0
	github.com/pulumi/pulumi/pkg/v3 v3.246.0
)
