// Command pulumi-tfgen-kafka generates the Pulumi schema of the Kafka provider from the Terraform
// provider's schema and the mapping in kafkadr.local/pulumi-kafka: `pulumi-tfgen-kafka schema --out DIR`.
package main

import (
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfgen"

	kafka "kafkadr.local/pulumi-kafka"
)

func main() {
	tfgen.Main("kafka", kafka.Version, kafka.Provider())
}
