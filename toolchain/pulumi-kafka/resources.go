// Package kafka maps the Terraform Kafka provider (github.com/Mongey/terraform-provider-kafka) onto
// Pulumi through pulumi-terraform-bridge, so that the PyPI SDK pulumi_kafka drives it unchanged.
//
// The Go module proxy refuses Pulumi's own provider module (github.com/pulumi/pulumi-kafka/provider/v3),
// so this project builds the same provider itself: the Terraform resources and data sources keep the
// tokens, property names and configuration defaults that pulumi_kafka's generated code sends on the
// wire. The token list is explicit (not derived) so that a new resource in a later Terraform provider
// release cannot silently change the schema: tfgen, and so the build, fails on anything unmapped.
package kafka

import (
	"github.com/Mongey/terraform-provider-kafka/kafka"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	shimv2 "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfshim/sdk-v2"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
)

// Version is the provider version; the build stamps it with
// -ldflags "-X kafkadr.local/pulumi-kafka.Version=<version>" (3.13.3, what pulumi_kafka asks for).
var Version = "0.0.0-dev"

const pkgName = "kafka"

// resource returns the token kafka:index/<camelName>:<Name>.
func resource(name string) tokens.Type {
	return tokens.Type(pkgName + ":index/" + lowerFirst(name) + ":" + name)
}

// function returns the token kafka:index:<name> (the SDK puts functions in the index module itself).
func function(name string) tokens.ModuleMember {
	return tokens.ModuleMember(pkgName + ":index:" + name)
}

func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}

// configDefault is a provider setting's default, overridable by the environment variable the
// Terraform provider and the SDK both honour.
func configDefault(env string, value interface{}) *tfbridge.SchemaInfo {
	return &tfbridge.SchemaInfo{Default: &tfbridge.DefaultInfo{EnvVars: []string{env}, Value: value}}
}

// Provider returns the bridge's description of the Kafka provider.
func Provider() tfbridge.ProviderInfo {
	prov := tfbridge.ProviderInfo{
		P:                 shimv2.NewProvider(kafka.Provider()),
		Name:              pkgName,
		Version:           Version,
		GitHubOrg:         "Mongey",
		Description:       "A Pulumi package for creating and managing Kafka.",
		Keywords:          []string{"pulumi", "kafka"},
		License:           "Apache-2.0",
		Homepage:          "https://pulumi.io",
		Repository:        "https://github.com/pulumi/pulumi-kafka",
		TFProviderLicense: ref(tfbridge.MITLicenseType),
		Config: map[string]*tfbridge.SchemaInfo{
			"sasl_mechanism":  configDefault("KAFKA_SASL_MECHANISM", "plain"),
			"skip_tls_verify": configDefault("KAFKA_SKIP_VERIFY", false),
			"tls_enabled":     configDefault("KAFKA_ENABLE_TLS", true),
		},
		Resources: map[string]*tfbridge.ResourceInfo{
			"kafka_topic": {Tok: resource("Topic")},
			"kafka_acl": {
				Tok: resource("Acl"),
				// "resourceName" and "resourceType" would clash with Pulumi's own resource fields.
				Fields: map[string]*tfbridge.SchemaInfo{
					"resource_name": {Name: "aclResourceName"},
					"resource_type": {Name: "aclResourceType"},
				},
			},
			"kafka_quota":                 {Tok: resource("Quota")},
			"kafka_user_scram_credential": {Tok: resource("UserScramCredential"), Docs: noDocs},
		},
		DataSources: map[string]*tfbridge.DataSourceInfo{
			"kafka_topic":  {Tok: function("getTopic"), Docs: noDocs},
			"kafka_topics": {Tok: function("getTopics")},
		},
		Python: &tfbridge.PythonInfo{RespectSchemaVersion: true},
		CSharp: &tfbridge.CSharpInfo{
			RespectSchemaVersion: true,
			PackageReferences:    map[string]string{"Pulumi": "3.*"},
			Namespaces:           map[string]string{pkgName: "Kafka"},
		},
	}
	// A topic, user or quota without an explicit name gets "<pulumi name>-<random>" (at most 255 chars).
	prov.SetAutonaming(255, "-")
	return prov
}

// noDocs marks a resource whose upstream documentation page is missing, so tfgen does not warn.
var noDocs = &tfbridge.DocInfo{Markdown: []byte{' '}}

func ref[T any](v T) *T { return &v }
