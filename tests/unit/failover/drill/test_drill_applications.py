"""The drill's applications follow their published configuration; their RTO is their own traffic's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dr.failover.drill.traffic import ConfigSource, rto_gap
from dr.failover.record.metrics import utc_text


def _publish(state: Path, app: str, bootstrap: str) -> None:
    d = state / "clients"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{app}.json"
    path.write_text(json.dumps({"bootstrap.servers": bootstrap, "sasl.username": app}))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a distinct mtime for each write


def test_config_source_reports_a_move_only_to_another_known_cluster(tmp_path: Path) -> None:
    source = ConfigSource(tmp_path, "orders-app", {"127.0.0.1:1": "A", "127.0.0.1:2": "B"})
    assert source.changed("127.0.0.1:1") is None, "nothing published yet"
    _publish(tmp_path, "orders-app", "127.0.0.1:1")
    assert source.changed("127.0.0.1:1") is None, "the same cluster is no move"
    _publish(tmp_path, "orders-app", "127.0.0.1:9")
    assert source.changed("127.0.0.1:1") is None, "an unknown cluster is ignored"
    _publish(tmp_path, "orders-app", "127.0.0.1:2")
    moved = source.changed("127.0.0.1:1")
    assert moved is not None and moved[1] == "B" and moved[0]["bootstrap.servers"] == "127.0.0.1:2"
    assert source.changed("127.0.0.1:2") is None, "read once"


def test_application_rto_is_last_on_source_to_first_on_target() -> None:
    gap = rto_gap("orders-app", "writes", [10.0, 12.5, 11.0], [19.0, 18.25], "A", "B")
    assert gap.rto_s == pytest.approx(5.75)
    assert gap.measured == "last write acknowledged on A → first write acknowledged on B"
    assert rto_gap("g", "reads", [1.0], [], "A", "B").rto_s is None, "never resumed: no RTO"


def test_utc_text_is_readable_and_exact_to_the_millisecond() -> None:
    assert utc_text(0) == "1970-01-01 00:00:00.000 UTC"
    assert utc_text(1795357202970) == "2026-11-22 14:20:02.970 UTC"
    assert utc_text(None) is None


def test_a_commit_of_the_old_client_after_the_move_is_not_the_applications(tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition

    from dr.failover.drill.traffic import ConsumerLoop

    loop = ConsumerLoop({"bootstrap.servers": "127.0.0.1:1"}, "A", "orders", ConfigSource(tmp_path, "billing", {}))
    on_a = loop.commit_recorder("A")
    on_a(None, [TopicPartition("orders", 0, 5)])
    loop._cluster = "B"  # the application moved; the old client closes in the background
    on_a(None, [TopicPartition("orders", 0, 7)])  # its closing commit, when A answers again
    loop.commit_recorder("B")(None, [TopicPartition("orders", 0, 7)])
    assert [c for c, _t in loop.commits] == ["A", "B"]


def test_the_snapshotter_never_takes_more_than_a_fifth_of_the_time() -> None:
    """Five snapshots a second of a small estate; at 1,000 topics, where one takes longer, less often."""
    from dr.failover.drill.traffic import snapshot_pause

    assert snapshot_pause(0.01) == 0.2 and snapshot_pause(0.05) == 0.2
    assert snapshot_pause(0.3) == 1.2
    for took in (0.01, 0.05, 0.1, 0.3, 2.0):
        assert took / (took + snapshot_pause(took)) <= 0.2


def _oauth_estate(tmp_path: Path, app_secret: str | None) -> Any:
    """A, B over OAUTHBEARER (secrets in plain text, as a unit test may); orders-app's secret on both, or on none."""
    from dr.estate.estate import Estate
    from dr.topology import load_topology

    def cluster(name: str, role: str) -> dict[str, Any]:
        app: dict[str, Any] = {"client_id": "orders-app"}
        if app_secret is not None:
            app["client_secret"] = app_secret
        return {
            "name": name, "role": role, "kind": "external", "bootstrap_servers": f"{name.lower()}.example:9092",
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
            "oauth": {
                "token_endpoint": "http://127.0.0.1:8080/kafka/token", "scope": "kafka", "audience": "kafka",
                "admin": {"client_id": "kdr-admin", "client_secret": "admin-secret"},
                "replicator": {"client_id": "replicator", "client_secret": "replicator-secret"},
                "applications": {"orders-app": app},
            },
        }  # fmt: skip

    topology = load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [cluster("A", "active"), cluster("B", "passive")],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {"applications": [{"name": "orders-app", "produces": ["orders"]}]},
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )
    return Estate(topology, tmp_path)


def _publish_oauth(state: Path, bootstrap: str) -> None:
    """What a failover publishes for orders-app on an OAUTHBEARER cluster: its client id, never its secret."""
    d = state / "clients"
    d.mkdir(parents=True, exist_ok=True)
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "orders-app",
    }
    path = d / "orders-app.json"
    path.write_text(json.dumps(conf))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_over_oauth_the_drills_application_logs_in_as_its_own_client_where_it_starts_and_where_it_moves(
    tmp_path: Path,
) -> None:
    """The published file lacks the secret (its team adds it): the drill adds orders-app's from the stack — not
    the admin's, not a generated SCRAM password — when it starts on A and when it follows the file to B."""
    from dr.failover.drill.traffic import start_config

    estate = _oauth_estate(tmp_path, "orders-secret")
    app = estate.topology.principals.applications[0]
    _publish_oauth(tmp_path, "a.example:9092")
    conf = start_config(estate, tmp_path, app, "A", "a.example:9092")
    assert conf["sasl.oauthbearer.client.id"] == "orders-app"
    assert conf["sasl.oauthbearer.client.secret"] == "orders-secret"
    source = ConfigSource(tmp_path, "orders-app", {"a.example:9092": "A", "b.example:9092": "B"}, estate)
    _publish_oauth(tmp_path, "b.example:9092")
    moved = source.changed("a.example:9092")
    assert moved is not None and moved[1] == "B"
    assert moved[0]["sasl.oauthbearer.client.id"] == "orders-app"
    assert moved[0]["sasl.oauthbearer.client.secret"] == "orders-secret"
    # nothing published for A yet: the application's own endpoint, still its own client
    (tmp_path / "clients" / "orders-app.json").unlink()
    conf = start_config(estate, tmp_path, app, "A", "a.example:9092")
    assert conf["sasl.oauthbearer.client.id"] == "orders-app"
    assert conf["sasl.oauthbearer.client.secret"] == "orders-secret"


def test_over_oauth_a_drill_whose_stack_lacks_the_applications_secret_is_refused_before_any_traffic(
    tmp_path: Path,
) -> None:
    from dr.base.errors import ConfigError
    from dr.failover.drill.traffic import start_traffic

    estate = _oauth_estate(tmp_path, None)
    _publish_oauth(tmp_path, "a.example:9092")
    with pytest.raises(ConfigError) as info:
        start_traffic(estate, tmp_path, 10, "drill")
    assert "'orders-app' logs in to OAUTHBEARER cluster" in info.value.problem, info.value.problem
    assert "oauth.applications.orders-app.clientSecret" in (info.value.fix or "")


def test_over_oauth_the_endpoints_unmodified_client_logs_in_as_the_application_not_the_admin(tmp_path: Path) -> None:
    from dr.failover.drill.endpoint_clients import endpoint_login

    ep = endpoint_login(_oauth_estate(tmp_path, "orders-secret"), "A", "orders-app", "127.0.0.1:19092")
    conf = ep.config()
    assert conf["bootstrap.servers"] == "127.0.0.1:19092", "the endpoint's address only"
    assert (
        conf["sasl.oauthbearer.client.id"] == "orders-app" and conf["sasl.oauthbearer.client.secret"] == "orders-secret"
    )
