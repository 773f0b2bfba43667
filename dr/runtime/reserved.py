"""What the product itself reserves on a local estate: the principal its Connect workers run as (so the
topology can refuse it for applications) and the ports of a local cluster.

Plain constants with no other import of the product: the runtime uses them, and so does the topology above it.
"""

CONNECT_USER = "connect"
"""The principal local Kafka Connect workers run as on their home cluster (their group and internal
topics only: the connectors send records as the replicator, through ``producer.override.*``)."""

PORT_WINDOW = 100
"""Ports reserved per local cluster: ``base_port`` .. ``base_port + PORT_WINDOW - 1``."""

ENDPOINT_LISTENER_OFFSET = 60
"""A local broker's endpoint listener (behind the client endpoint's proxy) is ``base_port + 60 + id - 1``,
inside its cluster's window."""

DRILL_METRICS_OFFSET = 90
"""In an automatic drill (``drctl drill --unplanned --automatic``), the site controller beside a local cluster
serves its metrics on ``base_port + 90``, inside its cluster's window."""

DRILL_WITNESS_OFFSET = 91
"""In an automatic drill, the drill's own etcd witness listens at the third site: ``base_port + 91`` (clients)
and ``+ 92`` (peers) of the standby's window (the passive's when the stack has no standby)."""
