"""The worked example of runbooks/oauth-clusters.md loads through the stack model and passes the OAUTHBEARER
rules (so it cannot rot): A as written, B and C the same entry under their own names — C the standby that a
failover links from B with the same replicator client."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from dr.runtime.certificates import make_ca
from dr.topology import load_topology
from tests import REPO_ROOT

PAGE = REPO_ROOT / "runbooks" / "oauth-clusters.md"
EXAMPLES = re.findall(r"<!-- oauth-example -->\n```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_keycloak_example_is_a_valid_oauthbearer_estate_with_a_standby(tmp_path: Path) -> None:
    (text,) = EXAMPLES
    for name in ("team-ca.pem", "keycloak-ca.pem"):  # the CA files exist on the operator's machine only
        (tmp_path / name).write_bytes(make_ca(name).certificate_pem)
        text = text.replace(f"/etc/kafka-dr/{name}", str(tmp_path / name))
    (a,) = yaml.safe_load(text)
    b = {**a, "name": "B", "role": "passive", "bootstrap_servers": "kafka-b1.corp:9094"}
    c = {**a, "name": "C", "role": "standby", "bootstrap_servers": "kafka-c1.corp:9094"}
    t = load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [a, b, c],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {"applications": [{"name": "orders-app", "produces": ["orders"]}]},
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )
    oauth = t.cluster("A").oauth
    assert oauth is not None and oauth.admin is not None and oauth.replicator is not None
    assert oauth.replicator.kafka_principal == t.principals.replicator
    assert oauth.applications["orders-app"].kafka_principal == "orders-app"
    assert oauth.token_endpoint == "https://keycloak.corp/realms/kafka/protocol/openid-connect/token"
    after = t.after_failover()
    assert {x.name: x.role.value for x in after.clusters} == {"A": "decommissioned", "B": "active", "C": "passive"}
    (link,) = after.links
    assert (link.source, link.target) == ("B", "C")
