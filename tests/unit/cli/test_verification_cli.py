"""drctl verify / recover as commands: flags, credentials files, cut-off parsing, exit codes (no Spark;
the runs on archives are in tests/spark/test_verification_cli.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dr.base.errors import ConfigError
from dr.cli.verify import recover, verify
from verification.endpoints import load_credentials, parse_cutoff, resolve_side

T0 = 1_760_000_000_000


def private_file(path: Path, data: dict, mode: int = 0o600) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1760000000123", 1760000000123),
        ("1760000000", 1760000000000),  # seconds are recognised, never read as 1970 ms
        ("2025-10-09T08:53:20Z", 1760000000000),
        ("2025-10-09T10:53:20+02:00", 1760000000000),
        ("2025-10-09T08:53:20", 1760000000000),  # no zone: UTC
        (None, None),
    ],
)
def test_parse_cutoff(text, expected):
    assert parse_cutoff(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "2025-13-40T00:00:00Z"])
def test_parse_cutoff_rejects_garbage(text):
    with pytest.raises(ConfigError):
        parse_cutoff(text)


def test_credentials_file_must_be_private(tmp_path):
    path = private_file(tmp_path / "c.json", {"username": "u", "password": "p"}, mode=0o644)
    with pytest.raises(ConfigError) as info:
        load_credentials(path)
    assert "chmod 600" in str(info.value) and str(info.value) != "p"


@pytest.mark.parametrize("data", [{"username": "u"}, ["u", "p"], {"username": 1, "password": "p"}])
def test_credentials_file_needs_username_and_password(tmp_path, data):
    with pytest.raises(ConfigError):
        load_credentials(private_file(tmp_path / "c.json", data))


def test_credentials_file_may_set_protocol(tmp_path):
    path = private_file(tmp_path / "c.json", {"username": "u", "password": "s3cret", "security_protocol": "SASL_SSL"})
    side = resolve_side("source", stack=None, name="A", bootstrap="h:1", credentials=path, archive=None)
    assert side.endpoint.security_protocol == "SASL_SSL" and side.endpoint.username == "u"
    assert "s3cret" not in repr(side) and "s3cret" not in json.dumps(side.describe())


OAUTH_FILE = {
    "username": "kdr-admin",
    "password": "client-s3cret",
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "OAUTHBEARER",
    "ssl_ca_location": "/etc/kafka/ca.pem",
    "oauth_token_endpoint": "https://idp.example.com/realms/kafka/protocol/openid-connect/token",
    "oauth_scope": "kafka",
    "oauth_audience": "kafka",
}


def test_an_oauthbearer_credentials_file_logs_in_with_the_client_and_its_identity_provider(tmp_path):
    path = private_file(tmp_path / "c.json", OAUTH_FILE)
    side = resolve_side("source", stack=None, name="A", bootstrap="h:9093", credentials=path, archive=None)
    ep = side.endpoint
    assert ep.uses_oauth and ep.oauth is not None and ep.oauth.ca_location == "/etc/kafka/ca.pem"  # the cluster's CA
    conf = ep.config()
    assert conf["sasl.oauthbearer.method"] == "oidc" and conf["sasl.oauthbearer.client.id"] == "kdr-admin"
    assert conf["sasl.oauthbearer.token.endpoint.url"] == OAUTH_FILE["oauth_token_endpoint"]
    assert conf["sasl.oauthbearer.scope"] == "kafka" and "sasl.username" not in conf
    assert "client-s3cret" not in repr(side) and "client-s3cret" not in json.dumps(side.describe())


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"oauth_token_endpoint": None}, "has no oauth_token_endpoint"),
        ({"oauth_token_endpoint": "http://idp.example.com/token"}, "neither https nor http on a loopback"),
        ({"ssl_ca_location": None}, "no CA for the identity provider"),
    ],
)
def test_an_oauthbearer_credentials_file_names_what_it_lacks(tmp_path, changes, named):
    data = {k: v for k, v in {**OAUTH_FILE, **changes}.items() if v is not None}
    path = private_file(tmp_path / "c.json", data)
    with pytest.raises(ConfigError) as info:
        resolve_side("source", stack=None, name="A", bootstrap="h:9093", credentials=path, archive=None)
    assert named in info.value.problem and "client-s3cret" not in str(info.value)


def test_recover_takes_oauthbearer_from_the_reports_side_and_the_provider_from_the_file(tmp_path):
    """A report's side recorded as OAUTHBEARER: a credentials file without a mechanism is read as one, so it
    must name the identity provider (else no login would ever be fetched)."""
    from dr.cli.verify import _recovery_endpoint

    recorded = {"bootstrap": "b:9093", "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}
    bare = private_file(tmp_path / "bare.json", {"username": "kdr-admin", "password": "client-s3cret"})
    with pytest.raises(ConfigError) as info:
        _recovery_endpoint("target", recorded, stack=None, bootstrap=None, credentials=bare)
    assert "oauth_token_endpoint" in info.value.problem
    full = private_file(
        tmp_path / "full.json",
        {"username": "kdr-admin", "password": "client-s3cret", "oauth_token_endpoint": "http://127.0.0.1:1/token"},
    )
    ep = _recovery_endpoint("target", recorded, stack=None, bootstrap=None, credentials=full)
    assert ep.uses_oauth and ep.bootstrap == "b:9093" and ep.username == "kdr-admin"


def test_a_side_needs_a_way_to_reach_it():
    with pytest.raises(ConfigError) as info:
        resolve_side("target", stack=None, name=None, bootstrap=None, credentials=None, archive=None)
    assert "--target-bootstrap" in str(info.value)
    with pytest.raises(ConfigError):
        resolve_side("source", stack=None, name=None, bootstrap="h:1", credentials=None, archive=None)


def test_verify_exits_2_on_a_readable_credentials_file(tmp_path):
    creds = private_file(tmp_path / "c.json", {"username": "u", "password": "p"}, mode=0o640)
    result = CliRunner().invoke(
        verify,
        [
            "--source-bootstrap",
            "127.0.0.1:1",
            "--target-bootstrap",
            "127.0.0.1:2",
            "--credentials",
            str(creds),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 2 and "chmod 600" in result.output


def test_verify_exits_2_for_an_unknown_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    result = CliRunner().invoke(
        verify, ["--stack", "nope", "--source", "A", "--target", "B", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2, result.output
    assert "nope" in result.output


def test_recover_without_a_report_is_a_config_error(tmp_path):
    result = CliRunner().invoke(recover, ["--report", str(tmp_path)])
    assert result.exit_code == 2 and "summary.json" in result.output


def test_verify_takes_the_cutoff_of_the_stacks_last_failover_between_the_same_clusters(tmp_path, monkeypatch):
    from dr.cli.verify import _cutoff
    from dr.failover.frame.journal import Journal

    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))
    from dr.base.stackref import StackRef

    j = Journal.create(
        StackRef.resolve("s").failover_home,  # the journal lives with the stack's backend
        stack="s",
        mode="planned",
        source="A",
        target="B",
        standby=None,
        original_config={},
        desired_config={},
        steps=["promote"],
    )
    j.measure(writable_from_ms=1_700_000_000_500)
    assert _cutoff(None, "s", "A", "B", quiet=True) == (1_700_000_000_499, None), "no bound taken: the time alone"
    j.measure(target_until={"orders:0": 7, "orders:1": 3})
    assert _cutoff(None, "s", "A", "B", quiet=True) == (1_700_000_000_499, {"orders": {0: 7, 1: 3}}), "and its bound"
    assert _cutoff(None, "s", "B", "C", quiet=True) == (None, None), "another pair: no cut-off"
    assert _cutoff("none", "s", "A", "B", quiet=True) == (None, None), "--cutoff none compares everything"
    explicit = _cutoff("1700000000000", "s", "A", "B", quiet=True)
    assert explicit == (1_700_000_000_000, None), "an explicit one wins, without the failover's bound"


def test_verify_resolves_its_stack_and_reads_its_stack_file_once(tmp_path, monkeypatch):
    """``drctl verify --stack S --source A --target B``: both sides and the cut-off come from one
    resolution of S and one reading of its stack file."""
    import dr.estate.estate as estate_module
    from dr.base.stackref import StackRef
    from dr.cli.verify import OneStack, _cutoff
    from tests.conftest import copy_stack

    copy_stack("local", tmp_path / "stacks" / "Pulumi.local.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path / "stacks"))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    resolved: list[str] = []
    read: list[Path] = []
    resolve, load = StackRef.resolve.__func__, estate_module.load_stack_file  # type: ignore[attr-defined]
    monkeypatch.setattr(StackRef, "resolve", classmethod(lambda cls, name: resolved.append(name) or resolve(cls, name)))
    monkeypatch.setattr(estate_module, "load_stack_file", lambda path: read.append(path) or load(path))

    one = OneStack("local")
    source, target = one.endpoint("local", "A"), one.endpoint("local", "B")
    assert _cutoff(None, one, "A", "B", quiet=True) == (None, None), "no failover recorded: no cut-off"
    assert source.bootstrap != target.bootstrap
    assert resolved == ["local"]
    assert read == [tmp_path / "stacks" / "Pulumi.local.yaml"]
