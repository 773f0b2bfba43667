"""Each TLS failure librdkafka reports → the diagnosis and the next step the error gives
(:func:`dr.kafka.client.transport_failure`), and OpenSSL's reason for a certificate that does not verify
(:mod:`dr.kafka.tls_diagnosis`) — without a broker or a listening socket.

The librdkafka texts are the ones its error callback gives (librdkafka 2.x, confluent-kafka's wheel): a
wrong CA or a certificate naming another host, an ``SSL`` client on a plaintext listener, a mutual-TLS
listener given no client certificate, and the message older librdkafka prints for a plaintext client on a
TLS listener. The handshakes of :func:`verify_reason` run over a socket pair, the server side in a thread.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from dr.base.errors import AuthError, ClusterError
from dr.kafka import client
from dr.kafka.client import TLS_FAILED, Endpoint, translate_kafka_error, transport_failure
from dr.kafka.tls import TlsFiles
from dr.kafka.tls_diagnosis import verify_reason
from dr.runtime.certificates import Issued, issue, make_ca

WRONG_CA = (
    "sasl_ssl://127.0.0.1:20800/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify "
    "failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root "
    "CA certificates are installed (install ca-certificates package) (after 4ms in state SSL_HANDSHAKE)"
)
WRONG_CA_SHORT = (
    "sasl_ssl://127.0.0.1:20800/bootstrap: error:0A000086:SSL routines::certificate verify failed "
    "(after 1ms in state SSL_HANDSHAKE)"
)
SSL_ON_PLAINTEXT = (
    "ssl://127.0.0.1:20802/bootstrap: SSL handshake failed: Disconnected: connection reset by peer: "
    "connecting to a PLAINTEXT broker listener? (after 0ms in state SSL_HANDSHAKE)"
)
NO_CLIENT_CERTIFICATE = (
    "ssl://127.0.0.1:20804/bootstrap: Receive failed: error:0A00045C:SSL routines::tlsv13 alert certificate "
    "required: SSL alert number 116 (after 0ms in state APIVERSION_QUERY)"
)
PLAINTEXT_ON_TLS = (
    "127.0.0.1:9093/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect "
    "security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 "
    "(see api.version.request) (after 5ms in state APIVERSION_QUERY)"
)
NOT_TLS = [
    "sasl_plaintext://127.0.0.1:20800/bootstrap: Connect to ipv4#127.0.0.1:20800 failed: Connection refused "
    "(after 0ms in state CONNECT)",
    "1/1 brokers are down",
    "Failed to get metadata: Local: Broker transport failure",
]


def _endpoint(protocol: str = "SASL_SSL", ca: str | None = "/etc/team/ca.pem") -> Endpoint:
    tls = TlsFiles(ca) if ca is not None else None
    return Endpoint("127.0.0.1:20800", "admin", "s3cret-pw", protocol, tls=tls, cluster="A")


@pytest.fixture
def reasons(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, TlsFiles | None]]:
    """verify_reason replaced: OpenSSL's reason is "certificate has expired"; the calls it got."""
    calls: list[tuple[str, TlsFiles | None]] = []

    def reason(bootstrap: str, tls: TlsFiles | None) -> str:
        calls.append((bootstrap, tls))
        return "certificate has expired"

    monkeypatch.setattr(client, "verify_reason", reason)
    return calls


@pytest.mark.parametrize("text", [WRONG_CA, WRONG_CA_SHORT])
def test_a_certificate_that_does_not_verify_names_openssls_reason_and_the_ca_to_check(
    text: str, reasons: list[tuple[str, TlsFiles | None]]
) -> None:
    ep = _endpoint()
    err = transport_failure(["1/1 brokers are down", text], ep)
    assert isinstance(err, ClusterError)
    assert err.problem == f"cluster 'A' (127.0.0.1:20800): {TLS_FAILED}: {text} (certificate has expired)"
    assert "tls.ca_file/ca_pem (/etc/team/ca.pem) is the CA that signed the brokers' certificates" in err.fix
    assert "not expired" in err.fix and "name the host dialled" in err.fix
    assert "openssl s_client -connect <host:port> -CAfile <ca>" in err.fix
    assert reasons == [("127.0.0.1:20800", ep.tls)]  # the handshake of its own, with the same trust
    assert "s3cret-pw" not in str(err)


def test_without_a_declared_ca_the_step_says_the_system_roots_were_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client, "verify_reason", lambda _b, _t: None)  # the second handshake verified
    err = transport_failure([WRONG_CA], _endpoint(ca=None))
    assert err is not None and err.problem == f"cluster 'A' (127.0.0.1:20800): {TLS_FAILED}: {WRONG_CA}"
    assert "(none declared: the system roots were used)" in err.fix


@pytest.mark.parametrize("text", [SSL_ON_PLAINTEXT, NO_CLIENT_CERTIFICATE])
def test_a_handshake_the_listener_refuses_points_at_the_protocol_and_the_client_certificate(
    text: str, reasons: list[tuple[str, TlsFiles | None]]
) -> None:
    err = transport_failure([text], _endpoint("SSL"))
    assert err is not None and err.problem == f"cluster 'A' (127.0.0.1:20800): {TLS_FAILED}: {text}"
    assert "security_protocol and tls settings in the stack match the brokers' listener" in err.fix
    assert "mutual TLS: the client certificate and key" in err.fix
    assert reasons == []  # no certificate to diagnose: no second handshake


def test_a_plaintext_client_on_a_tls_listener_is_told_to_match_the_listeners_protocol(
    reasons: list[tuple[str, TlsFiles | None]],
) -> None:
    """librdkafka's own hint names "a SSL listener": it reads as the TLS failure it is (the branch for a
    dropped connection that names security.protocol alone is never reached by this text)."""
    err = transport_failure([PLAINTEXT_ON_TLS], _endpoint("SASL_PLAINTEXT", ca=None))
    assert err is not None and err.problem == f"cluster 'A' (127.0.0.1:20800): {TLS_FAILED}: {PLAINTEXT_ON_TLS}"
    assert "security_protocol and tls settings in the stack match the brokers' listener" in err.fix
    assert reasons == []


def test_errors_that_are_not_about_tls_are_left_to_the_caller(reasons: list[tuple[str, TlsFiles | None]]) -> None:
    assert transport_failure(NOT_TLS, _endpoint()) is None and reasons == []


def test_a_kafka_exception_becomes_the_tls_diagnosis_then_the_login_then_reachability(
    reasons: list[tuple[str, TlsFiles | None]],
) -> None:
    ep = _endpoint()
    tls = translate_kafka_error(KafkaException(KafkaError(KafkaError._TRANSPORT, WRONG_CA)), "listing topics", ep)
    assert isinstance(tls, ClusterError) and tls.problem.startswith(
        f"listing topics: cluster 'A' (127.0.0.1:20800): {TLS_FAILED}"
    )
    assert "tls.ca_file" in tls.fix
    login = translate_kafka_error(
        KafkaException(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed")),
        "listing topics",
        ep,
    )
    assert isinstance(login, AuthError) and "refused user 'admin'" in login.problem and "s3cret-pw" not in str(login)
    down = translate_kafka_error(KafkaException(KafkaError(KafkaError._TRANSPORT, NOT_TLS[0])), "listing topics", ep)
    assert type(down) is ClusterError and TLS_FAILED not in down.problem and "`drctl status`" in down.fix


# -- OpenSSL's reason, over a socket pair ---------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> Issued:
    return make_ca("kdr diagnosis CA")


@contextmanager
def _presenting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, leaf: Issued) -> Iterator[list[Any]]:
    """Every connection verify_reason opens reaches a TLS server presenting ``leaf`` (the addresses it
    was asked for are collected)."""
    (tmp_path / "srv.pem").write_bytes(leaf.certificate_pem)
    (tmp_path / "srv.key").write_bytes(leaf.key_pem)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "srv.pem", tmp_path / "srv.key")
    dialled: list[Any] = []
    threads: list[threading.Thread] = []

    def serve(conn: socket.socket) -> None:
        try:
            server.wrap_socket(conn, server_side=True).close()
        except (OSError, ssl.SSLError):
            conn.close()

    def connect(address: Any, timeout: float) -> socket.socket:
        dialled.append(address)
        ours, theirs = socket.socketpair()
        ours.settimeout(timeout)
        theirs.settimeout(timeout)
        threads.append(threading.Thread(target=serve, args=(theirs,), daemon=True))
        threads[-1].start()
        return ours

    monkeypatch.setattr(socket, "create_connection", connect)
    yield dialled
    for t in threads:
        t.join(5)


def _trust(tmp_path: Path, ca: Issued, hostname_verification: bool = True) -> TlsFiles:
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    return TlsFiles(str(tmp_path / "ca.pem"), hostname_verification=hostname_verification)


def test_openssl_names_the_host_the_certificate_does_not_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ca: Issued
) -> None:
    with _presenting(monkeypatch, tmp_path, issue(ca, "broker", ("broker.example",))):
        assert verify_reason("localhost:9093", _trust(tmp_path, ca)) == (
            "Hostname mismatch, certificate is not valid for 'localhost'."
        )
        assert verify_reason("127.0.0.1:9093", _trust(tmp_path, ca)) == (
            "IP address mismatch, certificate is not valid for '127.0.0.1'."
        )
        assert verify_reason("localhost:9093", _trust(tmp_path, ca, hostname_verification=False)) is None


def test_openssl_names_an_unknown_issuer_and_an_expired_certificate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ca: Issued
) -> None:
    with _presenting(monkeypatch, tmp_path, issue(make_ca("someone else's CA"), "localhost", ("localhost",))):
        assert verify_reason("localhost:9093", _trust(tmp_path, ca)) == "unable to get local issuer certificate"
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    with _presenting(monkeypatch, tmp_path, issue(ca, "localhost", ("localhost",), days=1, not_before=long_ago)):
        assert verify_reason("localhost:9093", _trust(tmp_path, ca)) == "certificate has expired"


def test_the_first_address_that_answers_is_diagnosed_and_a_verified_one_has_no_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ca: Issued
) -> None:
    with _presenting(monkeypatch, tmp_path, issue(ca, "localhost", ("localhost",))) as dialled:
        assert verify_reason("broker-1:notaport, localhost:9093", _trust(tmp_path, ca)) is None
    assert dialled == [("localhost", 9093)]  # the address without a port number is skipped, not dialled

    def refused(address: Any, timeout: float) -> socket.socket:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refused)
    assert verify_reason("localhost:9093,localhost:9094", _trust(tmp_path, ca)) is None
