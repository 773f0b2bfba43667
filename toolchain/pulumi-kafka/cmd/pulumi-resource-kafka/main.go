// Command pulumi-resource-kafka is the Pulumi resource provider plugin for Kafka: the Terraform Kafka
// provider served through pulumi-terraform-bridge with the mapping in kafkadr.local/pulumi-kafka.
//
// schema-embed.json is generated at build time (scripts/setup_kafka_provider.sh): the schema written
// by pulumi-tfgen-kafka with its "version" set. It is not committed.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"

	kafka "kafkadr.local/pulumi-kafka"
)

//go:embed schema-embed.json
var pulumiSchema []byte

func main() {
	tfbridge.Main("kafka", kafka.Version, kafka.Provider(), pulumiSchema)
}
