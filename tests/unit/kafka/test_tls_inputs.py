"""What the stack's TLS inputs may carry (issue 45): a CA input gives its certificates alone; no certificate
check is switched off without a declared, loud opt-in; a private key readable by others is refused; and
the Pulumi program refuses a wrong CA with a handshake before it declares any resource."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pulumi
import pytest

from dr.base.errors import ClusterError, TopologyError
from dr.estate.stack import _translate
from dr.kafka.tls import TlsFiles, certificate_blocks, foreign_pem_blocks, provider_tls
from dr.runtime.certificates import Issued, issue, make_ca
from dr.topology import Topology, load_topology
from dr.topology.insecure import insecure_warnings
from dr.topology.transport import tls_files
from stacks.links.connect_config import connector_configs
from tests.unit.kafka.test_tls_clients import _serving
from tests.unit.stacks.test_stack_program import _fresh_mocks


@pytest.fixture(scope="module")
def ca() -> Issued:
    return make_ca("kdr inputs CA")


def _private(path: Path, data: bytes, mode: int = 0o600) -> str:
    path.write_bytes(data)
    path.chmod(mode)
    return str(path)


def _config(a: dict[str, Any], b: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    def ext(name: str, role: str, more: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name,
            "role": role,
            "kind": "external",
            "bootstrap_servers": f"{name.lower()}.example:9093",
            "admin_username": "admin",
            "admin_password": "pw",
            "security_protocol": "SASL_SSL",
            **more,
        }

    link: dict[str, Any] = {"name": "A-to-B", "source": "A", "target": "B"}
    config: dict[str, Any] = {
        "kafka-dr:clusters": [ext("A", "active", a), ext("B", "passive", b or {})],
        "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
        "kafka-dr:principals": {"replicator_password": "rpw", "applications": []},
        "kafka-dr:links": [link],
    }
    if extra.get("connect"):
        link["connect"] = "dr"
        creds = {"provider": "file", "path": "/etc/kc/r.properties"}
        config["kafka-dr:connectClusters"] = [
            {"name": "dr", "cluster": "B", "url": "http://127.0.0.1:8083", "replicator_credentials": creds}
        ]
    return config


def _topology(a: dict[str, Any], b: dict[str, Any] | None = None, **extra: Any) -> Topology:
    return load_topology("inputs", _config(a, b, **extra))


# -- a CA input gives its certificates alone -------------------------------------------------------------


def test_only_the_certificate_blocks_of_a_pem_text_are_kept(ca: Issued) -> None:
    other = make_ca("second CA").certificate_pem.decode()
    text = ca.key_pem.decode() + "junk\n" + ca.certificate_pem.decode() + other
    kept = certificate_blocks(text)
    assert kept == ca.certificate_pem.decode() + "\n" + other or kept.count("BEGIN CERTIFICATE") == 2
    assert "PRIVATE KEY" not in kept and "junk" not in kept
    assert foreign_pem_blocks(text) == ["PRIVATE KEY"] and foreign_pem_blocks(kept) == []
    assert certificate_blocks(ca.key_pem.decode()) == ""


def test_a_ca_file_holding_a_private_key_gives_every_client_its_certificates_alone(tmp_path: Path, ca: Issued) -> None:
    """Before: the whole file went into the provider's ``ca_cert`` (stored in the checkpoint in plain text)."""
    bundle = _private(tmp_path / "ca-with-key.pem", ca.key_pem + ca.certificate_pem, 0o644)
    t = _topology({"tls": {"ca_file": bundle}}, connect=True)
    files = tls_files(t.cluster("A"), tmp_path / "state")
    assert files is not None and files.ca_location is not None and files.ca_location != bundle
    copied = Path(files.ca_location)
    assert copied.parent == tmp_path / "state" / "tls" and copied.stat().st_mode & 0o777 == 0o600
    assert copied.read_text() == certificate_blocks(ca.certificate_pem.decode())
    ca_cert = provider_tls("SASL_SSL", files)["ca_cert"]
    assert isinstance(ca_cert, str) and "PRIVATE KEY" not in ca_cert and "BEGIN CERTIFICATE" in ca_cert
    # a CA file of certificates only is given as it is, its own path
    clean = _private(tmp_path / "ca.pem", ca.certificate_pem, 0o644)
    again = tls_files(_topology({"tls": {"ca_file": clean}}).cluster("A"), tmp_path / "state")
    assert again is not None and again.ca_location == clean
    assert any("holds PRIVATE KEY besides its certificates" in w for w in insecure_warnings(t))


def test_a_ca_pem_holding_a_private_key_reaches_no_connector_and_no_file(tmp_path: Path, ca: Issued) -> None:
    text = ca.certificate_pem.decode() + ca.key_pem.decode()
    t = _topology({}, {"tls": {"ca_pem": text}}, connect=True)
    source = connector_configs(t, t.links[0])["A-to-B-source"]
    assert source["target.cluster.ssl.truststore.certificates"] == certificate_blocks(text)
    assert "PRIVATE KEY" not in json.dumps(source)
    files = tls_files(t.cluster("B"), tmp_path)
    assert files is not None and files.ca_location is not None
    assert "PRIVATE KEY" not in Path(files.ca_location).read_text()


@pytest.mark.parametrize("as_file", [True, False], ids=["ca_file", "ca_pem"])
def test_a_ca_input_without_a_certificate_is_refused(tmp_path: Path, ca: Issued, as_file: bool) -> None:
    tls = {"ca_file": _private(tmp_path / "only-a-key.pem", ca.key_pem)} if as_file else {"ca_pem": ca.key_pem.decode()}
    with pytest.raises(TopologyError) as info:
        _topology({"tls": tls})
    field = "ca_file" if as_file else "ca_pem"
    assert f"clusters[0].tls.{field}" in str(info.value) and "holds no PEM certificate" in str(info.value)


# -- verification is switched off only by a declared, loud opt-in ------------------------------------------


def test_hostname_verification_off_keeps_the_providers_checks_on(tmp_path: Path, ca: Issued) -> None:
    """Before: ``hostname_verification: false`` gave the provider ``skip_tls_verify: true`` (no check at all)."""
    ca_file = _private(tmp_path / "ca.pem", ca.certificate_pem)
    t = _topology({"tls": {"ca_file": ca_file, "hostname_verification": False}})
    files = tls_files(t.cluster("A"), tmp_path)
    assert files is not None and provider_tls("SASL_SSL", files)["skip_tls_verify"] is False
    warnings = insecure_warnings(t)
    assert len(warnings) == 1 and "hostname_verification: false" in warnings[0] and "'A'" in warnings[0]


def test_insecure_skip_verify_is_the_only_way_to_skip_the_providers_checks_and_is_said(
    tmp_path: Path, ca: Issued
) -> None:
    ca_file = _private(tmp_path / "ca.pem", ca.certificate_pem)
    t = _topology({"tls": {"ca_file": ca_file, "insecureSkipVerify": True}})
    files = tls_files(t.cluster("A"), tmp_path)
    assert files is not None and files.insecure_skip_verify
    assert provider_tls("SASL_SSL", files)["skip_tls_verify"] is True
    assert files.hostname_verification  # drctl, MirrorMaker 2 and Spark keep checking
    (warning,) = insecure_warnings(t)
    assert warning.startswith("INSECURE: cluster 'A' declares tls.insecure_skip_verify")
    assert insecure_warnings(_topology({"tls": {"ca_file": ca_file}})) == []


def test_every_drctl_command_says_the_opt_in_on_stderr(
    tmp_path: Path, ca: Issued, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from dr.topology import load_stack_file

    ca_file = _private(tmp_path / "ca.pem", ca.certificate_pem)
    config = _config({"tls": {"ca_file": ca_file, "insecure_skip_verify": True}})
    for c in config["kafka-dr:clusters"]:
        c["admin_password"] = {"secure": "v1:abc"}
    config["kafka-dr:principals"]["replicator_password"] = {"secure": "v1:abc"}
    stack = tmp_path / "Pulumi.loud.yaml"
    stack.write_text(yaml.safe_dump({"config": config}))
    load_stack_file(stack)
    err = capsys.readouterr().err
    assert "warning: stack 'loud': INSECURE: cluster 'A' declares tls.insecure_skip_verify" in err


# -- a private key readable by others is refused ---------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_client_key_file_readable_by_others_is_refused(tmp_path: Path, ca: Issued, mode: int) -> None:
    client = issue(ca, "admin")
    tls = {
        "ca_file": _private(tmp_path / "ca.pem", ca.certificate_pem),
        "client_certificate_file": _private(tmp_path / "admin.pem", client.certificate_pem, 0o644),
        "client_key_file": _private(tmp_path / "admin.key", client.key_pem, mode),
    }
    with pytest.raises(TopologyError) as info:
        _topology({"security_protocol": "SSL", "tls": tls})
    text = str(info.value)
    assert "clusters[0].tls.client_key_file" in text and f"mode {mode:04o}" in text
    assert f"chmod 600 {tmp_path / 'admin.key'}" in text
    (tmp_path / "admin.key").chmod(0o400)
    assert _topology({"security_protocol": "SSL", "tls": tls}).cluster("A").tls is not None


# -- the program: a wrong CA stops it before any resource is declared --------------------------------------


@pytest.fixture
def engine_config() -> Iterator[None]:
    yield
    pulumi.runtime.set_all_config({}, [])


def _run_program(config: dict[str, Any], state: Path) -> Any:
    mocks, monitor, program = _fresh_mocks("inputs")
    engine = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    pulumi.runtime.set_all_config(engine, ["kafka-dr:clusters", "kafka-dr:principals"])

    @pulumi.runtime.test
    def whole_program() -> None:
        program.run(state)

    try:
        whole_program()
    except pulumi.RunError as exc:
        return mocks, monitor, str(exc)
    return mocks, monitor, None


def _at(port: int, tls: dict[str, Any], role_b: str = "passive") -> dict[str, Any]:
    config = _config({"bootstrap_servers": f"127.0.0.1:{port}", "tls": tls})
    config["kafka-dr:clusters"][1].update(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT")
    return config


def test_a_wrong_ca_stops_the_program_before_any_resource(tmp_path: Path, ca: Issued, engine_config: None) -> None:
    impostor = _private(tmp_path / "impostor.pem", make_ca("an impostor CA").certificate_pem)
    right = _private(tmp_path / "ca.pem", ca.certificate_pem)
    with _serving(tmp_path, issue(ca, "broker", ("127.0.0.1",))) as port:
        mocks, monitor, error = _run_program(_at(port, {"ca_file": impostor}), tmp_path / "state")
        assert error is not None and mocks.calls == [] and monitor.registrations == []
        assert f"cluster 'A' (127.0.0.1:{port}): TLS to the brokers failed: certificate verify failed" in error
        assert f"tls.ca_file {impostor}" in error and "Nothing was changed" in error and "next step:" in error
        # the right CA: the run goes on and declares the estate
        mocks, _monitor, error = _run_program(_at(port, {"ca_file": right}), tmp_path / "state")
        assert error is None and any(c.name == "A-kafka" for c in mocks.calls)


def test_a_host_mismatch_under_hostname_verification_off_names_the_providers_limit(
    tmp_path: Path, ca: Issued, engine_config: None
) -> None:
    right = _private(tmp_path / "ca.pem", ca.certificate_pem)
    with _serving(tmp_path, issue(ca, "broker", ("kafka-a1.corp",))) as port:
        off = {"ca_file": right, "hostname_verification": False}
        mocks, _monitor, error = _run_program(_at(port, off), tmp_path / "state")
        assert error is not None and mocks.calls == []
        assert "cannot skip only the host check" in error and "tls.insecure_skip_verify: true" in error
        # declared: the provider checks nothing, the handshake checks the chain only, the run goes on
        mocks, _monitor, error = _run_program(_at(port, {**off, "insecure_skip_verify": True}), tmp_path / "state")
        assert error is None and any(c.name == "A-kafka" for c in mocks.calls)


def test_nothing_answering_and_local_clusters_are_left_to_the_run(tmp_path: Path, engine_config: None) -> None:
    """A cluster nothing answers for (a lost A) and local clusters the program itself starts: no refusal."""
    impostor = _private(tmp_path / "impostor.pem", make_ca("an impostor CA").certificate_pem)
    config = _at(1, {"ca_file": impostor})  # port 1: nothing listens
    mocks, _monitor, error = _run_program(copy.deepcopy(config), tmp_path / "state")
    assert error is None and any(c.name == "A-kafka" for c in mocks.calls)


def test_drctl_reports_the_programs_tls_refusal_as_exit_4_nothing_created() -> None:
    engine_output = (
        "Diagnostics:\n  pulumi:pulumi:Stack (kafka-dr-s):\n    error: error: cluster 'B' (h:9093): TLS to the "
        "brokers failed: certificate verify failed (unable to get local issuer certificate), with tls.ca_file "
        "/x.pem. Nothing was changed\n  next step: check ...\nResources:\n    12 unchanged\n"
    )
    err = _translate(RuntimeError(engine_output), "`pulumi preview` of stack 's'")
    assert isinstance(err, ClusterError) and err.exit_code == 4
    assert "cluster 'B'" in str(err) and "tls.ca_file /x.pem" in str(err)


def test_a_tls_files_ca_location_default_is_unchanged() -> None:
    assert TlsFiles().insecure_skip_verify is False


# -- the RTO probe under mutual TLS writes as the application, or not at all ---------------------------------


class _Probe:
    made: ClassVar[list[Any]] = []

    def __init__(self, endpoint: Any, topic: str, *, failover_id: str) -> None:
        self.endpoint, self.topic = endpoint, topic
        _Probe.made.append(self)

    def start(self) -> None:
        return None


def _probe_ctx(tmp_path: Path, b_ep: Any, said: list[str]) -> Any:
    from types import SimpleNamespace

    from tests.unit.kafka.test_tls_clients import _topology as with_app

    original = with_app({"tls": {}}, {"tls": {}})
    return SimpleNamespace(
        options=SimpleNamespace(probe=True),
        journal=SimpleNamespace(measurements=SimpleNamespace(probe=None), failover_id="f-1"),
        original=original,
        source="A",
        b_ep=b_ep,
        before=SimpleNamespace(app_password=lambda _name: "app-pw"),
        state=tmp_path,
        progress=said.append,
    )


def test_under_mutual_tls_the_rto_probe_writes_as_the_application_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``with_user`` kept the admin's certificate, so the probe wrote as the admin — never fenced, never
    refused — and the failover reported the round trip of its first write as the RTO (0.285 s)."""
    from dr.failover.frame import run as frame_run
    from dr.kafka.client import Endpoint

    monkeypatch.setattr(frame_run, "WriteProbe", _Probe)
    _Probe.made.clear()
    admin = TlsFiles("/ca.pem", "/admin.pem", "/admin.key", "/admin.p12")
    said: list[str] = []
    mtls = Endpoint("127.0.0.1:1", "", "", "SSL", tls=admin, cluster="B")
    assert frame_run._start_probe(_probe_ctx(tmp_path, mtls, said)) is None
    assert _Probe.made == [] and "RTO probe: not run" in said[0] and "app.crt" in said[0]
    (tmp_path / "clients").mkdir()
    for name in ("app.crt", "app.key"):
        (tmp_path / "clients" / name).write_text("x")
    probe = frame_run._start_probe(_probe_ctx(tmp_path, mtls, said))
    assert probe is not None and probe.endpoint.tls.certificate_location == str(tmp_path / "clients" / "app.crt")
    assert probe.endpoint.tls.key_location == str(tmp_path / "clients" / "app.key")
    assert probe.endpoint.tls.ca_location == "/ca.pem" and probe.topic == "orders"
    sasl = Endpoint("127.0.0.1:1", "admin", "pw", "SASL_SSL", tls=TlsFiles("/ca.pem"), cluster="B")
    probe = frame_run._start_probe(_probe_ctx(tmp_path, sasl, said))
    assert probe is not None and probe.endpoint.username == "app" and probe.endpoint.tls == TlsFiles("/ca.pem")
