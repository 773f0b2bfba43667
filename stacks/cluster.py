"""``KafkaCluster``: one cluster of the topology and the explicit ``pulumi_kafka`` provider that reaches it.

* ``kind: local`` — the cluster itself is a resource (:class:`stacks.local_cluster.LocalKafkaCluster`);
  its admin password is generated into the stack's state directory (0600) and enters the program
  only as a secret.
* ``kind: external`` — bootstrap servers and admin credentials from the stack config (secrets).
* ``kind: confluent-cloud`` — see :mod:`stacks.confluent` (the cluster is a ``pulumi_confluentcloud``
  resource; topics and ACLs go through the same Kafka provider with the cluster's API key).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kafka as kafka

from dr.base.errors import ConfigError
from dr.kafka.tls import provider_tls, uses_sasl
from dr.runtime.local_tls import local_tls_files
from dr.topology import Cluster, Kind
from dr.topology.model import ClientEndpoint
from dr.topology.oauth_login import oauth_settings, uses_oauth
from dr.topology.transport import tls_files
from stacks.kafka_sets import Connection
from stacks.local_cluster import LocalKafkaCluster, LocalKafkaClusterArgs

__all__ = ["KafkaCluster", "KafkaClusterArgs"]

_MECHANISMS = {"PLAIN": "plain", "SCRAM-SHA-256": "scram-sha256", "SCRAM-SHA-512": "scram-sha512"}


@dataclass(frozen=True, kw_only=True)
class KafkaClusterArgs:
    """What :class:`KafkaCluster` needs: the cluster, where local state lives, the admin login."""

    cluster: Cluster
    state_dir: Path
    admin_username: str
    admin_password: pulumi.Output[str]
    endpoint: ClientEndpoint | None = None
    """The estate's client endpoint: a local cluster then runs an endpoint listener advertising it."""
    lease_fence: bool = False
    """A local cluster runs the broker-side lease fence (the stack's failover policy is automatic)."""


class KafkaCluster(pulumi.ComponentResource):
    """One Kafka cluster of the estate, with ``bootstrap_servers`` and a ``provider`` for its resources."""

    bootstrap_servers: pulumi.Output[str]
    provider: kafka.Provider
    connection: Connection
    """The same admin login as :attr:`provider`, for the batched topic and ACL sets (:mod:`stacks.kafka_sets`)."""

    def __init__(self, name: str, args: KafkaClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("kafka-dr:index:KafkaCluster", name, None, opts)
        c = args.cluster
        self.role = c.role.value
        if c.is_local:
            self.local: LocalKafkaCluster | None = LocalKafkaCluster(
                f"{c.name}-brokers",
                LocalKafkaClusterArgs(
                    name=c.name,
                    role=c.role.value,
                    brokers=c.brokers,
                    base_port=c.base_port or 0,
                    racks=list(c.racks),
                    state_dir=str(args.state_dir),
                    tls=c.local_tls,
                    endpoint=(
                        {"address": args.endpoint.address, "ports": list(args.endpoint.broker_ports)}
                        if args.endpoint is not None
                        else None
                    ),
                    lease_fence=args.lease_fence,
                ),
                pulumi.ResourceOptions(parent=self),
            )
            self.bootstrap_servers = self.local.bootstrap_servers
            protocol, files = c.client_protocol, local_tls_files(args.state_dir) if c.local_tls else None
        elif c.kind is Kind.EXTERNAL:
            self.local = None
            if not c.bootstrap_servers:
                raise ConfigError(
                    f"cluster {c.name!r} is external but has no bootstrap_servers.",
                    f"set kafka-dr:clusters[{c.name}].bootstrapServers in the stack file",
                )
            self.bootstrap_servers = pulumi.Output.from_input(c.bootstrap_servers)
            protocol = c.security_protocol
            # PEMs declared in the stack (decrypted by the engine) become 0600 files under the state dir
            files = tls_files(c, args.state_dir)
        else:
            raise ConfigError(
                f"cluster {c.name!r}: kind {c.kind.value} is built by stacks.confluent.",
                "report this as a bug: the program should not route it here",
            )
        mechanism = "SCRAM-SHA-512" if c.is_local else c.sasl_mechanism
        self.connection = Connection(
            cluster=c.name,
            bootstrap=self.bootstrap_servers,
            username=args.admin_username,
            password=args.admin_password,
            mechanism=mechanism,
            security_protocol=protocol,
            tls=asdict(files) if files is not None else None,
        )
        tls: dict[str, Any] = provider_tls(protocol, files)
        if "client_key" in tls:
            tls["client_key"] = pulumi.Output.secret(tls["client_key"])
        login: dict[str, Any] = {}
        if uses_sasl(protocol) and uses_oauth(c):
            # The provider fetches its own tokens (client-credentials grant): the admin's client id and secret.
            settings = oauth_settings(c, args.state_dir)
            login = {
                "sasl_username": args.admin_username,
                "sasl_password": pulumi.Output.secret(args.admin_password),
                "sasl_mechanism": "oauthbearer",
                "sasl_token_url": settings.token_endpoint,
            }
            if settings.scope:
                login["sasl_oauth_scopes"] = settings.scope.split()
            self.connection["oauth"] = asdict(settings)
        elif uses_sasl(protocol):  # mutual TLS (SSL): the client certificate is the login
            login = {
                "sasl_username": args.admin_username,
                "sasl_password": pulumi.Output.secret(args.admin_password),
                "sasl_mechanism": _MECHANISMS[mechanism],
            }
        self.provider = kafka.Provider(
            f"{c.name}-kafka",
            bootstrap_servers=self.bootstrap_servers.apply(lambda s: s.split(",")),
            kafka_version="2.7.0",
            opts=pulumi.ResourceOptions(parent=self),
            **login,
            **tls,
        )
        self.register_outputs({"role": self.role, "bootstrap_servers": self.bootstrap_servers})
