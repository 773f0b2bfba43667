"""Existing (``kind: external``) clusters without a cluster: backend and passphrase the Pulumi way,
the replicator's credentials through a declared Connect config provider, plan text, secrets lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.connect_config import connector_configs
from dr.errors import ConfigError, TopologyError
from dr.failover.plan import _actions
from dr.failover.steps import FailoverOptions
from dr.pulumi_env import backend_url, pulumi_env
from dr.stack import _scratch_project, _secrets_provider
from dr.stack_secrets import _collect
from dr.topology import ConnectCredentials, Topology, load_topology

PASSWORD = "s3cret-replicator-pw"


def _config(**connect: Any) -> dict[str, Any]:
    clusters = [
        {
            "name": n,
            "role": r,
            "kind": "external",
            "bootstrap_servers": f"{n.lower()}.example:9093",
            "admin_username": "admin",
            "admin_password": f"{n}-admin-pw",
        }
        for n, r in (("A", "active"), ("B", "passive"), ("C", "standby"))
    ]
    return {
        "kafka-dr:clusters": clusters,
        "kafka-dr:topics": [{"name": "orders", "partitions": 3, "replication_factor": 1}],
        "kafka-dr:principals": {
            "replicator_password": PASSWORD,
            "applications": [{"name": "orders-app", "produces": ["orders"]}],
        },
        "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B", "connect": "dr"}],
        "kafka-dr:connectClusters": [
            {
                "name": "dr",
                "cluster": "B",
                "url": "http://connect.example:8083",
                "replicator_credentials": {"provider": "file", "path": "/etc/kc/replicator.properties"},
                **connect,
            }
        ],
    }


def _topology(**connect: Any) -> Topology:
    return load_topology("ext", _config(**connect))


@pytest.mark.parametrize(
    ("declared", "user_ref", "password_ref"),
    [
        ({"provider": "file", "path": "/etc/kc/r.properties"}, "${file:/etc/kc/r.properties:username}", "${file:/etc/kc/r.properties:password}"),
        ({"provider": "directory", "path": "/run/secrets/mm2"}, "${directory:/run/secrets/mm2:username}", "${directory:/run/secrets/mm2:password}"),
        ({"provider": "env"}, "${env:KDR_REPLICATOR_USERNAME}", "${env:KDR_REPLICATOR_PASSWORD}"),
        ({"provider": "env", "alias": "vars", "password_variable": "MM2_PW"}, "${vars:KDR_REPLICATOR_USERNAME}", "${vars:MM2_PW}"),
    ],
)  # fmt: skip
def test_each_config_provider_gives_the_references_the_connectors_hold(
    declared: dict[str, str], user_ref: str, password_ref: str
) -> None:
    t = _topology(replicator_credentials=declared)
    creds = t.connect_clusters[0].replicator_credentials
    assert creds is not None and creds.references() == (user_ref, password_ref)
    configs = connector_configs(t, t.links[0], credentials=creds.references(), internal_rf=1)
    source = configs["A-to-B-source"]
    assert f'username="{user_ref}" password="{password_ref}"' in source["target.cluster.sasl.jaas.config"]
    assert (
        source["replication.factor"] == "1"
        and configs["A-to-B-heartbeat"]["heartbeats.topic.replication.factor"] == "1"
    )
    assert PASSWORD not in str(configs)


def test_internal_topics_follow_a_declared_replication_factor() -> None:
    cfg = _config()
    cfg["kafka-dr:clusters"][1]["internal_topics_replication_factor"] = 2
    t = load_topology("ext", cfg)
    configs = connector_configs(t, t.links[0], credentials=("u", "p"))
    assert configs["A-to-B-checkpoint"]["checkpoints.topic.replication.factor"] == "2"


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ({"provider": "file"}, "needs `path`"),
        ({"provider": "directory", "path": "relative/dir"}, "absolute path"),
        ({"provider": "file", "path": "/etc/a:b"}, "cannot hold ':'"),
        ({"provider": "vault", "path": "/x"}, "provider"),
    ],
)
def test_a_bad_provider_declaration_is_refused_naming_the_field(declared: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match="replicator_credentials") as info:
        _topology(replicator_credentials=declared)
    assert expected in str(info.value)


def test_an_external_connect_cluster_must_say_where_workers_find_the_credentials() -> None:
    cfg = _config()
    del cfg["kafka-dr:connectClusters"][0]["replicator_credentials"]
    del cfg["kafka-dr:principals"]["replicator_password"]
    with pytest.raises(TopologyError) as info:
        load_topology("ext", cfg)
    text = str(info.value)
    assert "connect_clusters[0].replicator_credentials" in text and "provider: file" in text
    assert "principals.replicator_password" in text and "replicatorPassword" in text


def test_secrets_are_looked_up_by_owner_and_never_shown() -> None:
    found = _collect(_topology())
    assert found.admin == {"A": "A-admin-pw", "B": "B-admin-pw", "C": "C-admin-pw"}
    assert "pw" not in repr(found)


def test_the_backend_is_the_one_pulumi_would_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    (tmp_path / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\n")
    assert backend_url(tmp_path / "default", tmp_path) == f"file://{tmp_path / 'default'}"
    (tmp_path / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\nbackend:\n  url: file:///shared/b\n")
    assert backend_url(tmp_path / "default", tmp_path) == "file:///shared/b"
    monkeypatch.setenv("PULUMI_BACKEND_URL", "s3://team-bucket/pulumi")
    assert backend_url(tmp_path / "default", tmp_path) == "s3://team-bucket/pulumi"


def test_the_callers_passphrase_wins_over_the_generated_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    env = pulumi_env(tmp_path / "backend")
    assert env["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(tmp_path / "passphrase")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "team-passphrase"))
    assert "PULUMI_CONFIG_PASSPHRASE_FILE" not in pulumi_env(tmp_path / "backend")
    assert pulumi_env("file:///elsewhere")["PULUMI_BACKEND_URL"] == "file:///elsewhere"


def test_the_preview_copy_of_the_project_has_no_main_and_keeps_the_rest(tmp_path: Path) -> None:
    project, scratch = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    scratch.mkdir()
    (project / "Pulumi.yaml").write_text(
        "name: kafka-dr\nruntime:\n  name: python\nmain: stacks/\nbackend:\n  url: file:///b\n"
    )
    _scratch_project(project, scratch)
    text = (scratch / "Pulumi.yaml").read_text()
    assert "main" not in text and "file:///b" in text and "kafka-dr" in text
    (project / "Pulumi.x.yaml").write_text("secretsprovider: awskms://alias/dr\nconfig: {}\n")
    assert _secrets_provider(project / "Pulumi.x.yaml") == "awskms://alias/dr"
    assert _secrets_provider(project / "Pulumi.missing.yaml") == "passphrase"


def test_the_plan_speaks_of_external_clusters_as_running_and_kept(tmp_path: Path) -> None:
    t = _topology()
    actions = _actions(t, t.after_failover(), "planned", FailoverOptions(), tmp_path, tmp_path / "Pulumi.ext.yaml")
    assert "start C" not in actions["desired-state"] and "broker(s)" not in actions["desired-state"]
    assert "external cluster C (already running)" in actions["desired-state"]
    assert "connectors on Connect cluster dr" in actions["desired-state"]
    assert "forget A's users, topics and ACLs" in actions["decommission"] and "stop A" not in actions["decommission"]


def test_connect_credentials_model_is_exported() -> None:
    assert ConnectCredentials(provider="env").provider_alias == "env"
