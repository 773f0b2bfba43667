"""The client endpoint's model and rules (issue 31): bad ports are refused naming both sides."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.topology import load_topology
from tests.unit.topology.test_topology_validation import LOCAL

ENDPOINT = {"address": "127.0.0.1", "bootstrapPort": 19900, "brokerPorts": [19901, 19902, 19903]}


def _with(endpoint: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(LOCAL)
    config["kafka-dr:endpoint"] = endpoint
    return config


def test_endpoint_loads_with_its_ports() -> None:
    t = load_topology("local", _with(ENDPOINT))
    assert t.endpoint is not None
    assert t.endpoint.bootstrap == "127.0.0.1:19900"
    assert t.endpoint.ports == [19900, 19901, 19902, 19903]
    assert t.endpoint.advertised(2) == "127.0.0.1:19902"


def test_port_on_a_broker_is_refused_naming_both() -> None:
    with pytest.raises(TopologyError) as err:
        load_topology("local", _with({**ENDPOINT, "bootstrapPort": 19201}))
    assert err.value.exit_code == 2
    text = str(err.value)
    assert "endpoint.bootstrap_port" in text and "19201" in text
    # 19201 is not a bound port of the 1-broker B, but it is inside B's window; 19100 is A's broker 1.
    with pytest.raises(TopologyError) as err:
        load_topology("local", _with({**ENDPOINT, "brokerPorts": [19100, 19902, 19903]}))
    assert "endpoint.broker_ports[0]" in str(err.value)
    assert "broker 1's client port of cluster 'A'" in str(err.value)


def test_too_few_slots_twice_the_same_port_and_remote_address_are_refused() -> None:
    with pytest.raises(TopologyError) as err:
        load_topology("local", _with({**ENDPOINT, "brokerPorts": [19901, 19901]}))
    text = str(err.value)
    assert "endpoint.broker_ports[1]: port 19901 is already endpoint.broker_ports[0]" in text
    assert "2 broker slot(s) for cluster 'A' of 3 brokers" in text
    with pytest.raises(TopologyError, match="not a loopback address"):
        load_topology("local", _with({**ENDPOINT, "address": "10.0.0.5"}))


def test_topology_without_endpoint_keeps_none() -> None:
    assert load_topology("local", copy.deepcopy(LOCAL)).endpoint is None


def test_broker_gets_an_endpoint_listener_advertising_the_proxy_port() -> None:
    from pathlib import Path

    from dr.runtime.cluster import ClusterSpec, server_properties

    spec = ClusterSpec("A", brokers=3, base_port=19100, endpoint_ports=(19901, 19902, 19903))
    props = server_properties(spec, 2, Path("/tmp/x"), "pw")
    assert "ENDPOINT://127.0.0.1:19161" in props["listeners"]
    assert "ENDPOINT://127.0.0.1:19902" in props["advertised.listeners"]
    assert "CLIENT://127.0.0.1:19101" in props["advertised.listeners"]  # the direct listener stays
    assert props["listener.name.endpoint.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert 19161 in spec.ports()
    plain = server_properties(ClusterSpec("A", brokers=3, base_port=19100), 2, Path("/tmp/x"), "pw")
    assert "ENDPOINT" not in plain["listeners"]


def test_proxy_config_and_switch_commands() -> None:
    from dr.runtime.endpoint import Backend, EndpointSpec, haproxy_config, switch_commands

    spec = EndpointSpec("127.0.0.1", 19900, (19901, 19902), (Backend("A", (19160, 19161)), Backend("B", (19260,))))
    text = haproxy_config(spec, "A", Path("/s/api.sock"))
    assert "stats socket /s/api.sock mode 600 level admin" in text
    assert "mode tcp" in text
    assert "    server A 127.0.0.1:19161\n" in text  # slot 2: A's broker 2, ready
    assert "    server B 127.0.0.1:19260 disabled" in text
    assert "kdr_slot2" in text and "server B_1" in text
    cmds = switch_commands(spec, "B")
    assert cmds.index("set server kdr_slot1/A state maint") < cmds.index("set server kdr_slot1/B state ready")
    assert cmds[-1] == "shutdown sessions server kdr_slot2/A"
    with pytest.raises(ConfigError, match="no cluster 'C'"):
        switch_commands(spec, "C")


def test_the_endpoint_survives_the_failover_and_its_stack_file_edit(tmp_path: Path) -> None:
    import yaml

    from dr.topology import load_stack_file
    from dr.topology.stackfile import write_stack_config
    from tests import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    doc["config"]["kafka-dr:endpoint"] = ENDPOINT
    path = tmp_path / "Pulumi.local.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    after = load_stack_file(path).after_failover()
    assert after.endpoint == load_stack_file(path).endpoint
    assert write_stack_config(path, after)  # refused before: after_failover dropped the endpoint
    assert load_stack_file(path).endpoint == after.endpoint


def test_an_endpoint_in_front_of_a_local_tls_cluster_is_refused() -> None:
    config = _with(ENDPOINT)
    config["kafka-dr:clusters"][0]["local_tls"] = True
    with pytest.raises(TopologyError) as err:
        load_topology("local", config)
    assert err.value.exit_code == 2
    assert "clusters[A].local_tls" in str(err.value) and "SASL_PLAINTEXT" in str(err.value)


def test_an_external_estates_switch_names_each_clusters_servers_on_the_teams_proxy() -> None:
    """External clusters: the platform team's proxy holds, per declared cluster, ``<cluster>_<i>`` in
    kdr_bootstrap and ``<cluster>`` in each kdr_slot<i>; the switch names exactly those (before: none,
    and it failed with "the endpoint has no cluster")."""
    import yaml

    from dr.runtime.endpoint import switch_commands
    from dr.topology.client_endpoint import endpoint_spec, local_endpoint
    from tests import REPO_ROOT

    config = yaml.safe_load((REPO_ROOT / "Pulumi.production-example.yaml").read_text())["config"]
    config["kafka-dr:endpoint"] = {
        "address": "kafka.example.internal",
        "bootstrapPort": 9092,
        "brokerPorts": [9101, 9102],
        "runtimeApi": "10.0.0.9:9999",
        "insecureRemoteRuntimeApi": True,  # a remote runtime API only when declared (issue 45)
    }
    t = load_topology("production-example", config)
    spec = endpoint_spec(t)
    assert spec is not None and [b.name for b in spec.backends] == ["dc1", "dc2", "dc3"]
    commands = switch_commands(spec, "dc2")
    assert commands[:2] == ["set server kdr_bootstrap/dc1_1 state maint", "set server kdr_bootstrap/dc1_2 state maint"]
    assert "set server kdr_slot2/dc2 state ready" in commands and "shutdown sessions server kdr_slot1/dc3" in commands
    assert len(commands) == 8 + 4 + 8  # 4 servers per cluster: the others' to maint, dc2's ready, the others' cut
    assert local_endpoint(t, Path("/nonexistent")) is None  # nothing runs on this machine


# -- the runtime API is local-only unless declared (issue 45): it has no authentication -------------------


def _external(endpoint: dict[str, Any]) -> Any:
    import yaml

    from tests import REPO_ROOT

    config = yaml.safe_load((REPO_ROOT / "Pulumi.production-example.yaml").read_text())["config"]
    config["kafka-dr:endpoint"] = {
        "address": "kafka.example.internal",
        "bootstrapPort": 9092,
        "brokerPorts": [9101, 9102],
        **endpoint,
    }
    return load_topology("production-example", config)


def test_a_runtime_api_on_a_remote_address_is_refused_unless_declared() -> None:
    """Before: any host:port was accepted, and the README told teams to open the API on a TCP port."""
    for where in ("10.0.0.9:9999", "proxy.example.internal:9999", "0.0.0.0:9999"):
        with pytest.raises(TopologyError) as err:
            _external({"runtimeApi": where})
        text = str(err.value)
        assert f"endpoint.runtime_api: {where} is not a loopback address" in text, text
        assert "no authentication" in text and "ssh -N -L 127.0.0.1:9999:" in text
        assert "insecure_remote_runtime_api: true" in text
    declared = _external({"runtimeApi": "10.0.0.9:9999", "insecureRemoteRuntimeApi": True})
    from dr.topology.insecure import insecure_warnings

    (warning,) = insecure_warnings(declared)
    assert warning.startswith("INSECURE: endpoint.insecure_remote_runtime_api") and "10.0.0.9:9999" in warning


@pytest.mark.parametrize("where", ["127.0.0.1:9999", "[::1]:9999", "localhost:9999", "/run/haproxy/kdr.sock"])
def test_a_loopback_port_or_a_socket_path_is_accepted_without_a_warning(where: str) -> None:
    from dr.topology.insecure import insecure_warnings

    t = _external({"runtimeApi": where})
    assert t.endpoint is not None and t.endpoint.runtime_api == where and insecure_warnings(t) == []


def test_a_runtime_api_socket_open_to_every_user_or_no_address_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "admin.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        path.chmod(0o666)
        with pytest.raises(TopologyError) as err:
            _external({"runtimeApi": str(path)})
        assert "open to every local user (mode 0666)" in str(err.value) and "mode 600 level admin" in str(err.value)
        path.chmod(0o600)
        assert _external({"runtimeApi": str(path)}).endpoint is not None
    finally:
        server.close()
    for bad in ("proxy-without-port", "relative/path.sock", "127.0.0.1:99999"):
        with pytest.raises(TopologyError, match="neither the absolute path of a unix socket nor host:port"):
            _external({"runtimeApi": bad})


def test_the_opt_in_without_a_teams_runtime_api_is_refused() -> None:
    with pytest.raises(TopologyError, match=r"endpoint\.insecure_remote_runtime_api: is set without a runtime_api"):
        load_topology("local", _with({**ENDPOINT, "insecureRemoteRuntimeApi": True}))
