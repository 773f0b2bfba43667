"""Every port and URL of a stack is checked for range and form, the message naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import TopologyError
from dr.topology import load_topology
from tests.unit.stacks.test_connect_stack import config_with, connect_entry, violations
from tests.unit.topology.test_topology_validation import PRODUCTION


def _far(url: str) -> dict[str, Any]:
    far = {
        "name": "far",
        "cluster": "B",
        "url": url,
        "replicatorCredentials": {"provider": "file", "path": "/etc/kafka-connect/secrets/replicator.properties"},
    }
    return config_with(connectClusters=[*connect_entry(), far])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://connect.example:99999", "port 99999 of 'http://connect.example:99999' is outside 1..65535"),
        ("http://connect.example:65536", "port 65536 of 'http://connect.example:65536' is outside 1..65535"),
        ("https://connect.example:0", "port 0 of 'https://connect.example:0' is outside 1..65535"),
        ("ftp://connect.example:8083", "is not an http(s) URL of a Connect REST API (scheme ftp)"),
        ("connect.example:8083", "is not an http(s) URL of a Connect REST API (scheme missing)"),
        ("http://:8083", "is not an http(s) URL of the form http(s)://host[:port][/path]"),
        ("http://connect example:8083", "is not an http(s) URL of the form"),
        ("http://-bad-.example:8083", "has no valid host name ('-bad-.example')"),
        ("http://[::g]:8083", "is not an http(s) URL of the form"),
        ("http://[fe80::1::2]:8083", "has no valid IPv6 address"),
    ],
)
def test_a_malformed_or_out_of_range_connect_url_is_refused_naming_the_field(url: str, expected: str) -> None:
    text = violations(_far(url))
    line = next(x for x in text.splitlines() if "connect_clusters[1].url" in x)
    assert expected in line, line
    assert "use http(s)://host:port with a port of 1-65535" in line


@pytest.mark.parametrize(
    "url", ["http://connect.example:8083", "https://10.0.0.5:443/connect", "http://[::1]:8083", "https://c.example"]
)
def test_a_well_formed_connect_url_is_accepted(url: str) -> None:
    config = _far(url)
    topology = load_topology("local-connect", config)
    assert topology.connect_clusters[1].url == url


def test_an_out_of_range_bootstrap_port_is_refused_naming_the_field() -> None:
    config: dict[str, Any] = {**PRODUCTION}
    clusters = [dict(c) for c in config["kafka-dr:clusters"]]
    clusters[1]["bootstrap_servers"] = "broker-1.dc2.example.com:9093,broker-2.dc2.example.com:70000"
    config["kafka-dr:clusters"] = clusters
    with pytest.raises(TopologyError) as info:
        load_topology("prod", config)
    line = next(x for x in str(info.value).splitlines() if "clusters[1].bootstrap_servers" in x)
    assert "port 70000 of 'broker-2.dc2.example.com:70000' (cluster 'dc2') is outside 1..65535" in line


def test_a_local_connect_cluster_in_the_ephemeral_range_is_refused() -> None:
    text = violations(config_with(connectClusters=connect_entry(base_port=32767)))
    line = next(x for x in text.splitlines() if "connect_clusters[0].base_port" in x)
    assert "REST ports 32767..32768 leave the range 1024..32767" in line
    assert "choose a base_port between 1024 and 32766" in line


def test_estate_up_with_an_out_of_range_connect_url_exits_2_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from dr.cli import main
    from tests import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local-connect.yaml").read_text())
    doc["config"]["kafka-dr:connectClusters"].append({"name": "far", "cluster": "B", "url": "http://connect:99999"})
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.unit.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("KDR_STACK_DIR", str(stacks))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as info:
        main(["estate", "up", "--stack", "unit"])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert "connect_clusters[1].url: port 99999 of 'http://connect:99999' is outside 1..65535" in err
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("pid"))
