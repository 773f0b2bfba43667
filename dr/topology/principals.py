"""Principal names the product itself runs as (so the topology can refuse them for applications)."""

CONNECT_USER = "connect"
"""The principal local Kafka Connect workers run as on their home cluster (their group and internal
topics only: the connectors send records as the replicator, through ``producer.override.*``)."""
