"""Existing (``kind: external``) clusters without a cluster: backend and passphrase the Pulumi way,
the replicator's credentials through a declared Connect config provider, plan text, secrets lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.base.pulumi_env import backend_url, pulumi_env
from dr.estate.stack import _scratch_project, _secrets_provider
from dr.estate.stack_secrets import _collect
from dr.failover.frame.step import FailoverOptions
from dr.failover.kinds.active_passive.run import _actions
from dr.topology import ConnectCredentials, Topology, load_topology
from stacks.links.connect_config import connector_configs

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


@pytest.fixture
def production(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The production example (external clusters, encrypted placeholders) with no backend holding it."""
    from tests import REPO_ROOT

    d = tmp_path / "project"
    d.mkdir()
    (d / "Pulumi.prod.yaml").write_text((REPO_ROOT / "Pulumi.production-example.yaml").read_text())
    monkeypatch.setenv("KDR_STACK_DIR", str(d))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'empty-backend'}")
    return d


def _run(*args: str) -> int:
    from dr.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_a_failover_that_cannot_decrypt_the_stack_is_refused_before_any_journal(
    production: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("failover", "--stack", "prod", "--yes") == 5
    err = capsys.readouterr().err
    assert "holds encrypted secrets" in err and "PULUMI_BACKEND_URL" in err and "PULUMI_CONFIG_PASSPHRASE" in err
    assert "--source-bootstrap" not in err, "advice names only flags that exist"
    assert not (tmp_path / "state" / "prod" / "failover" / "journal.json").exists()


class _Worker:
    """A stand-in for one Connect worker's validate endpoint: it resolves ``${...}`` references from
    ``resolved`` (what its config providers hold) and echoes every value, as Connect does."""

    def __init__(self, resolved: dict[str, str]) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                configs = [
                    {"value": {"name": k, "value": outer.resolved.get(v, v), "errors": []}} for k, v in body.items()
                ]
                data = json.dumps({"configs": configs}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self.resolved = resolved
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.mark.parametrize(
    ("resolved", "expected"),
    [
        ({}, "cannot resolve the replicator's username ${file:/etc/kc/replicator.properties:username}"),
        ({"${file:/etc/kc/replicator.properties:username}": "someone"}, "resolves ${file:/etc/kc/replicator.properties:username} to 'someone'"),
        ({"${file:/etc/kc/replicator.properties:username}": "replicator"}, "cannot resolve the replicator's password"),
        (
            {"${file:/etc/kc/replicator.properties:username}": "replicator", "${file:/etc/kc/replicator.properties:password}": "old-pw"},
            "is not the stack's principals.replicator_password",
        ),
    ],
)  # fmt: skip
def test_a_worker_lacking_the_replicators_credentials_is_named_before_anything_is_created(
    resolved: dict[str, str], expected: str
) -> None:
    from dr.kafka.connect_rest import ConnectRest
    from stacks.links.connect_credentials import check_worker_credentials

    worker = _Worker(resolved)
    try:
        t = _topology()
        with pytest.raises(ConfigError) as info:
            check_worker_credentials(ConnectRest(worker.url), t.connect_clusters[0], "replicator", PASSWORD)
        text = str(info.value)
        assert expected in text and "nothing was created" in text
        assert PASSWORD not in text and "old-pw" not in text
        if "cannot resolve" in expected:
            assert "FileConfigProvider" in text and "/etc/kc/replicator.properties" in text
    finally:
        worker.server.shutdown()


def test_a_worker_that_resolves_both_passes() -> None:
    from dr.kafka.connect_rest import ConnectRest
    from stacks.links.connect_credentials import check_worker_credentials

    worker = _Worker(
        {
            "${file:/etc/kc/replicator.properties:username}": "replicator",
            "${file:/etc/kc/replicator.properties:password}": PASSWORD,
        }
    )
    try:
        check_worker_credentials(ConnectRest(worker.url), _topology().connect_clusters[0], "replicator", PASSWORD)
    finally:
        worker.server.shutdown()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--unplanned",), ["will not stop", "make dc1 unreachable yourself", "--mode unplanned"]),
        (("--cycles", "2"), ["never deletes topics", "role: standby", "one cycle"]),
        (("--base-port", "20000"), ["--base-port", "without --base-port"]),
    ],
)
def test_the_drill_on_an_external_stack_refuses_what_would_touch_brokers_it_does_not_own(
    production: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...], said: list[str]
) -> None:
    """A planned one-cycle drill runs on the stack itself (tests/integration/test_external_estate.py);
    an unplanned one, several cycles or moved ports are refused before anything changes."""
    out = tmp_path / "drill"
    assert _run("drill", "--stack", "prod", "--out", str(out), *flags) == 2
    err = capsys.readouterr().err
    assert all(s in err for s in said), err
    assert "Nothing was changed" in err and not out.exists()


def test_the_drill_takes_its_aims_from_the_command_line(
    production: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--aim-rto` / `--aim-a-b-c` set the checks' limits (a 1,000-topic estate's A→B→C is longer);
    unset, the defaults; a limit of 0 is refused by the option itself."""
    import dr.failover.kinds.active_passive.drill as drill
    from dr.base.errors import ConfigError
    from dr.failover.drill.frame import DrillOptions
    from dr.failover.drill.grade import DEFAULT_AIMS

    seen: list[dict[str, float]] = []

    def stop_here(options: DrillOptions, _topology: object) -> ConfigError:
        seen.append(dict(options.aims))
        return ConfigError("stopped by the test.", "nothing")

    monkeypatch.setattr(drill, "external_refusal", stop_here)
    out = str(tmp_path / "drill")
    assert _run("drill", "--stack", "prod", "--out", out, "--aim-rto", "12", "--aim-a-b-c", "300") == 2
    assert _run("drill", "--stack", "prod", "--out", out) == 2
    assert seen == [{"rto_s": 12.0, "a_b_c_s": 300.0}, DEFAULT_AIMS]
    assert _run("drill", "--stack", "prod", "--out", out, "--aim-a-b-c", "0") == 2 and len(seen) == 2


def test_the_failover_journal_lives_with_a_file_backend_and_in_the_state_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``file://`` backend (shared directory, NFS) holds the journal, so any clone using it resumes a
    failover; with another backend it stays in the state directory and `drctl status` says so."""
    from dr.base.stackref import StackRef
    from dr.failover.status import StatusReport, render_status

    ref = StackRef("prod", tmp_path / "project", tmp_path / "state" / "prod")
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}/shared")
    assert ref.failover_home == tmp_path / "shared" / ".pulumi" / "kdr" / "kafka-dr" / "prod" and ref.journal_shared
    monkeypatch.setenv("PULUMI_BACKEND_URL", "s3://team-bucket/kafka-dr")
    assert ref.failover_home == ref.state_dir and not ref.journal_shared
    report = StatusReport(
        stack="prod",
        failover_done=False,
        clusters=[],
        links=[],
        consumer_groups=[],
        last_failover=None,
        problems=[],
        journal_home=str(ref.failover_home),
        journal_shared=False,
    )
    text = render_status(report)
    assert f"failover journal: {ref.state_dir}/failover/" in text and "KDR_STATE_DIR" in text
    assert "KDR_STATE_DIR" not in render_status(report.model_copy(update={"journal_shared": True}))


def _oauth_config(url: str, *, b_oauth: bool = True) -> dict[str, Any]:
    """A and B accept OAUTHBEARER only (B SCRAM when not ``b_oauth``); the link A-to-B runs on Connect at ``url``."""
    cfg = _config(url=url)
    oauth = {
        "token_endpoint": "http://127.0.0.1:8180/realms/kafka/protocol/openid-connect/token",
        "scope": "kafka",
        "audience": "kafka",
        "admin": {"client_id": "kdr-admin", "client_secret": "admin-secret"},
        "replicator": {"client_id": "kdr-replicator", "client_secret": "repl-secret", "principal": "replicator"},
        "applications": {"orders-app": {"client_id": "orders-app"}},
    }
    for c in cfg["kafka-dr:clusters"][: 2 if b_oauth else 1]:
        del c["admin_username"], c["admin_password"]
        c |= {"sasl_mechanism": "OAUTHBEARER", "oauth": oauth}
    return cfg


def _declared(secret: Any) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def test_a_link_between_oauth_clusters_on_connect_needs_no_replicator_password() -> None:
    """Its workers log the replicator in with its client id and secret (oauth.replicator), which the check compares
    with what they resolve; principals.replicator_password is not asked for."""
    from stacks.links.connect import replicator_logins

    cfg = _oauth_config("http://connect.example:8083")
    del cfg["kafka-dr:principals"]["replicator_password"]
    t = load_topology("ext", cfg)
    logins = replicator_logins(t, "dr")
    assert {(field, user, _declared(secret)) for field, user, secret in logins} == {
        ("clusters[0].oauth.replicator.clientSecret", "kdr-replicator", "repl-secret"),
        ("clusters[1].oauth.replicator.clientSecret", "kdr-replicator", "repl-secret"),
    }


def test_a_link_with_a_scram_end_on_connect_still_needs_the_replicator_password() -> None:
    cfg = _oauth_config("http://connect.example:8083", b_oauth=False)
    del cfg["kafka-dr:principals"]["replicator_password"]
    with pytest.raises(TopologyError, match=r"principals\.replicator_password"):
        load_topology("ext", cfg)


@pytest.mark.parametrize(
    ("resolved_password", "expected"),
    [
        ("repl-secret", None),
        ("old-secret", "is not the stack's clusters[0].oauth.replicator.client_secret"),
    ],
)
def test_the_workers_are_checked_against_the_replicators_client_over_oauth(
    resolved_password: str, expected: str | None
) -> None:
    import pulumi

    from stacks.links.connect import check_workers

    worker = _Worker(
        {
            "${file:/etc/kc/replicator.properties:username}": "kdr-replicator",
            "${file:/etc/kc/replicator.properties:password}": resolved_password,
        }
    )
    try:
        cfg = _oauth_config(worker.url)
        del cfg["kafka-dr:principals"]["replicator_password"]
        t = load_topology("ext", cfg)
        if expected is None:
            check_workers(t, _declared)
            return
        with pytest.raises(pulumi.RunError) as info:
            check_workers(t, _declared)
        text = str(info.value)
        assert expected in text and "kafka-dr:clusters[0].oauth.replicator.clientSecret" in text
        assert "repl-secret" not in text and "old-secret" not in text
    finally:
        worker.server.shutdown()


def test_ends_whose_replicator_logins_differ_are_named_before_any_worker_is_asked() -> None:
    """One OAUTHBEARER end and one SCRAM end: the workers' one username and password cannot log in to both."""
    import pulumi

    from stacks.links.connect import check_workers

    t = load_topology("ext", _oauth_config("http://127.0.0.1:9", b_oauth=False))
    with pytest.raises(pulumi.RunError) as info:
        check_workers(t, _declared)
    text = str(info.value)
    assert "log the replicator in with different credentials" in text
    assert "clusters[0].oauth.replicator.clientSecret" in text and "principals.replicatorPassword" in text
    assert "repl-secret" not in text and PASSWORD not in text
