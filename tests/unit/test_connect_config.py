"""MirrorMaker 2 connector configs for Kafka Connect, rendered from the production example."""

from __future__ import annotations

import json

import pytest

from dr.connect_config import CONNECTORS, connector_configs
from dr.errors import ConfigError
from dr.toolchain import REPO_ROOT
from dr.topology import load_stack_file


def test_three_connectors_for_the_production_link_with_no_inline_secret() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    link = topo.links[0]
    configs = connector_configs(topo, link)
    assert {c["connector.class"] for c in configs.values()} == set(CONNECTORS.values())
    source = configs[f"{link.name}-source"]
    assert source["source.cluster.alias"] == link.source and source["target.cluster.alias"] == link.target
    assert source["replication.policy.class"].endswith("IdentityReplicationPolicy")
    assert source["source.cluster.bootstrap.servers"] == topo.cluster(link.source).bootstrap_servers
    checkpoint = configs[f"{link.name}-checkpoint"]
    assert checkpoint["sync.group.offsets.enabled"] == "true"
    text = json.dumps(configs)
    assert "${file:" in text, "credentials come from the worker's config provider"
    for c in topo.clusters:
        if c.admin_password is not None:
            assert c.admin_password.get_secret_value() not in text


def test_local_clusters_are_refused_with_the_local_alternative() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    with pytest.raises(ConfigError, match="drctl estate up"):
        connector_configs(topo, topo.links[0])
