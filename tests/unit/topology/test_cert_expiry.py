"""``drctl tls``: when each certificate a stack uses expires (declared CA bundles and client certificates,
a local estate's CA and broker certificates), and exit 9 when one expires within ``--within`` days."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dr.base.errors import CertificateExpiring
from dr.cli.drctl import cli
from dr.runtime.certificates import Issued, issue, make_ca
from dr.runtime.local_tls import broker_certificate
from dr.topology import load_topology
from dr.topology.cert_expiry import certificate_expiries, expiring

NOW = dt.datetime.now(dt.UTC)


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def old_ca() -> Issued:
    return make_ca("team CA 2025", days=20)  # expires in ~20 days: the one being rotated out


@pytest.fixture(scope="module")
def new_ca() -> Issued:
    return make_ca("team CA 2026", days=800)


def _config(tmp_path: Path, old_ca: Issued, new_ca: Issued) -> dict[str, object]:
    bundle = _write(tmp_path / "bundle.pem", old_ca.certificate_pem + new_ca.certificate_pem)
    admin = issue(new_ca, "kdr-admin", days=100)
    a_tls = {
        "ca_file": bundle,
        "client_certificate_file": _write(tmp_path / "admin.pem", admin.certificate_pem),
        "client_key_file": _write(tmp_path / "admin.key", admin.key_pem),
    }
    return {
        "kafka-dr:clusters": [
            {"name": "A", "role": "active", "kind": "external", "bootstrap_servers": "a:9094"}
            | {"security_protocol": "SSL", "tls": a_tls},
            {"name": "B", "role": "passive", "kind": "external", "bootstrap_servers": "b:9093"}
            | {"tls": {"ca_pem": new_ca.certificate_pem.decode()}},
        ],
        "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
        "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
    }


def test_every_entry_of_a_bundle_and_the_client_certificate_soonest_first(
    tmp_path: Path, old_ca: Issued, new_ca: Issued
) -> None:
    entries = certificate_expiries(load_topology("t", _config(tmp_path, old_ca, new_ca)), tmp_path)
    got = [(e.cluster, e.use, e.subject) for e in entries]
    assert got == [
        ("A", "CA bundle", "CN=team CA 2025"),
        ("A", "client certificate", "CN=kdr-admin"),
        ("A", "CA bundle", "CN=team CA 2026"),
        ("B", "CA bundle", "CN=team CA 2026"),
    ]
    assert 19 < entries[0].days_left < 20.1
    assert entries[0].source == str(tmp_path / "bundle.pem")
    assert entries[-1].source == "clusters[1].tls.ca_pem"
    assert [e.subject for e in expiring(entries, 30)] == ["CN=team CA 2025"]
    assert expiring(entries, 10) == []


def test_a_local_estate_lists_its_ca_once_and_each_broker_certificate(tmp_path: Path) -> None:
    topo = load_topology(
        "local-tls",
        {
            "kafka-dr:clusters": [
                {"name": "A", "role": "active", "local_tls": True, "base_port": 19100},
                {"name": "B", "role": "passive", "local_tls": True, "base_port": 19200},
            ],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )
    assert certificate_expiries(topo, tmp_path) == []  # nothing made yet, and nothing made by looking
    assert not (tmp_path / "tls").exists()
    broker_certificate(tmp_path, "A")
    broker_certificate(tmp_path, "B")
    uses = sorted((e.cluster, e.use) for e in certificate_expiries(topo, tmp_path))
    assert uses == [("(estate)", "local CA"), ("A", "broker certificate"), ("B", "broker certificate")]


def _stack(tmp_path: Path, config: dict[str, object]) -> Path:
    (tmp_path / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\n")
    (tmp_path / "Pulumi.tls.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


def test_cli_prints_the_table_and_exits_9_within_the_window(
    tmp_path: Path, old_ca: Issued, new_ca: Issued, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _stack(tmp_path, _config(tmp_path, old_ca, new_ca))
    monkeypatch.setenv("KDR_STACK_DIR", str(project))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    runner = CliRunner()
    soon = runner.invoke(cli, ["tls", "--stack", "tls"])
    assert isinstance(soon.exception, CertificateExpiring) and soon.exception.exit_code == 9
    assert "CN=team CA 2025" in soon.output and "<< within 30 days" in soon.output
    assert "1 certificate(s) of stack 'tls' expire within 30 days" in str(soon.exception)
    calm = runner.invoke(cli, ["tls", "--stack", "tls", "--within", "7", "--json"])
    assert calm.exit_code == 0, calm.output
    doc = json.loads(calm.output)
    assert doc["within_days"] == 7 and len(doc["certificates"]) == 4
    assert not any(row["within"] for row in doc["certificates"])
    assert "PRIVATE" not in calm.output


def test_cli_refuses_a_negative_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(cli, ["tls", "--stack", "local", "--within", "-1"])
    assert result.exit_code == 2
