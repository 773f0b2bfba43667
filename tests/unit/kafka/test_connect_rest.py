"""The Kafka Connect REST client against a small real HTTP server, and the workers' pure configuration
(no JVM; the real workers are in tests/integration/test_connect_link.py)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from dr.base.errors import AuthError, ClusterError, ConfigError
from dr.kafka.client import Endpoint
from dr.kafka.connect_rest import ConnectRest
from dr.runtime.connect import BASIC_AUTH_EXTENSION, ConnectSpec, connect_acls, worker_properties
from dr.runtime.process import port_free

SECRET = "s3cr3t-Value"


class _Connect(BaseHTTPRequestHandler):
    """Answers like Connect: JSON errors with ``message``; scripted answers per path."""

    answers: ClassVar[dict[tuple[str, str], list[tuple[int, object]]]] = {}
    seen: ClassVar[list[tuple[str, str, str | None, object]]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
        queue = self.answers.get((self.command, self.path), [])
        status, payload = (
            queue.pop(0) if len(queue) > 1 else (queue[0] if queue else (404, {"error_code": 404, "message": "nope"}))
        )
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Connect.answers, _Connect.seen = {}, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Connect)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _free_port() -> int:
    return next(p for p in range(30990, 30999) if port_free(p))


def test_basic_auth_travels_in_a_header_and_names_are_percent_encoded(server: str) -> None:
    _Connect.answers[("GET", "/connectors/a%20b%3F%23%C3%A4/config")] = [(200, {"k": "v"})]
    rest = ConnectRest(server, username="connect-rest", password=SECRET)
    assert rest.config("a b?#ä") == {"k": "v"}
    _method, _path, auth, _ = _Connect.seen[-1]
    assert auth == "Basic " + base64.b64encode(f"connect-rest:{SECRET}".encode()).decode()
    assert SECRET not in repr(rest) and SECRET not in rest.url
    assert rest.config("missing") is None and rest.status("missing") is None
    rest.delete("missing")


def test_a_url_with_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(ConfigError, match="carries credentials") as info:
        ConnectRest(f"http://user:{SECRET}@127.0.0.1:8083")
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError):
        ConnectRest("127.0.0.1:8083")
    with pytest.raises(ConfigError, match="both"):
        ConnectRest("http://127.0.0.1:8083", username="u")


@pytest.mark.parametrize("name", ["a/b", "a\\b", "50%", "a;b", "..", "tab\there", ""])
def test_names_the_rest_server_cannot_address_are_refused_before_any_request(name: str) -> None:
    with pytest.raises(ConfigError):
        ConnectRest(f"http://127.0.0.1:{_free_port()}").delete(name)


def test_unreachable_names_every_url_tried_and_falls_back_to_a_live_worker(server: str) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(ClusterError, match=f"Kafka Connect at {dead} is unreachable: connection refused") as info:
        ConnectRest(dead, timeout=2).connectors()
    assert "start the Connect cluster or fix the connect url" in str(info.value)
    _Connect.answers[("GET", "/connectors")] = [(200, ["b", "a"])]
    assert ConnectRest(dead, fallback_urls=[server]).connectors() == ["a", "b"]
    with pytest.raises(ClusterError, match="name not resolved"):
        ConnectRest("http://no-such-host.invalid:8083", timeout=2).info()


def test_http_errors_map_to_the_product_errors_and_never_hold_the_password(server: str) -> None:
    rest = ConnectRest(server, username="connect-rest", password=SECRET)
    _Connect.answers[("GET", "/")] = [(401, {"error_code": 401, "message": f"bad {SECRET}"})]
    with pytest.raises(AuthError, match="HTTP 401") as info:
        rest.info()
    assert SECRET not in str(info.value)
    _Connect.answers[("PUT", "/connectors/x/config")] = [(500, {"error_code": 500, "message": "boom inside"})]
    with pytest.raises(ClusterError, match="HTTP 500: boom inside"):
        rest.put_config("x", {"a": "b"})
    # 409 (a rebalance) is retried; the answer after it counts.
    _Connect.answers[("PUT", "/connectors/x/stop")] = [(409, {"message": "rebalance"}), (204, None)]
    rest.stop("x")
    # so is the 500 of a worker that expects a rebalance (seen creating a link's three connectors at once)
    expected = "Request cannot be completed because a rebalance is expected"
    _Connect.answers[("GET", "/connectors/x/config")] = [(500, {"error_code": 500, "message": expected}), (200, {})]
    assert rest.config("x") == {}
    _Connect.answers[("PUT", "/connectors/x/resume")] = [(400, None)]
    with pytest.raises(ClusterError, match="HTTP 400: Bad Request"):
        rest.resume("x")


def test_validate_lists_field_errors_and_restart_sends_its_flags(server: str) -> None:
    plugin = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"
    _Connect.answers[("PUT", f"/connector-plugins/{plugin}/config/validate")] = [
        (
            200,
            {
                "error_count": 1,
                "configs": [
                    {"value": {"name": "tasks.max", "errors": ["Not a number of type INT"]}},
                    {"value": {"name": "name", "errors": []}},
                ],
            },
        )
    ]
    rest = ConnectRest(server)
    assert rest.validate({"connector.class": plugin, "tasks.max": "x"}) == ["tasks.max: Not a number of type INT"]
    assert _Connect.seen[-1][3]["name"], "Connect requires a name to validate"
    with pytest.raises(ConfigError, match=r"connector\.class"):
        rest.validate({})
    _Connect.answers[("POST", "/connectors/x/restart?includeTasks=true&onlyFailed=false")] = [(202, {})]
    rest.restart("x", only_failed=False)


def test_wait_running_raises_with_the_first_trace_line_of_a_failed_task(server: str) -> None:
    _Connect.answers[("GET", "/connectors/x/status")] = [
        (
            200,
            {
                "name": "x",
                "connector": {"state": "RUNNING", "worker_id": "w1"},
                "tasks": [
                    {
                        "id": 0,
                        "state": "FAILED",
                        "worker_id": "w1",
                        "trace": "org.apache.kafka.common.errors.SaslAuthenticationException: bad\n\tat x.y",
                    }
                ],
            },
        )
    ]
    with pytest.raises(ClusterError, match=r"task 0 of 'x' FAILED on w1: .*SaslAuthenticationException: bad\n"):
        ConnectRest(server).wait_running("x", timeout=5)
    _Connect.answers[("GET", "/connectors/y/status")] = [
        (200, {"name": "y", "connector": {"state": "STOPPED", "worker_id": "w1"}, "tasks": []})
    ]
    assert ConnectRest(server).wait_state("y", "STOPPED", timeout=5)["tasks"] == []
    with pytest.raises(ClusterError, match="is not RUNNING after"):
        ConnectRest(server).wait_running("y", timeout=0.5)


def test_worker_properties_least_privilege_and_secret_provider() -> None:
    spec = ConnectSpec("dr", base_port=30700)
    home = Endpoint("127.0.0.1:30600", "connect", "pw")
    props = worker_properties(spec, 1, home, home_brokers=1, secrets_dir=Path("/s/secrets"))
    assert props["group.id"] == "connect-dr"
    assert props["listeners"] == "http://127.0.0.1:30701"
    assert props["config.storage.topic"] == "connect-dr-configs"
    assert props["config.storage.replication.factor"] == "1"
    assert props["config.providers.file.param.allowed.paths"] == "/s/secrets"
    assert props["connector.client.config.override.policy"] == "All"
    assert props["rest.extension.classes"] == BASIC_AUTH_EXTENSION
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[f"{prefix}security.protocol"] == "SASL_PLAINTEXT"
        assert 'username="connect"' in props[f"{prefix}sasl.jaas.config"]
    assert worker_properties(spec, 0, home, 3, Path("/s"))["status.storage.replication.factor"] == "3"
    topics = {b.name for b in connect_acls(spec) if b.restype.name == "TOPIC"}
    assert topics == {"connect-dr-configs", "connect-dr-offsets", "connect-dr-status"}
    with pytest.raises(ConfigError):
        ConnectSpec("bad name", base_port=30700)
    with pytest.raises(TypeError):
        ConnectSpec("dr")  # type: ignore[call-arg]


def test_a_client_connect_cannot_build_names_where_the_cause_is_and_the_declaration(server: str) -> None:
    """Connect answers "Failed to construct kafka producer" without its cause; a task's trace keeps it."""
    rest = ConnectRest(server)
    failed = {"error_code": 500, "message": "Failed to construct kafka producer"}
    _Connect.answers[("DELETE", "/connectors/x/offsets")] = [(500, failed)]
    with pytest.raises(ClusterError, match=r"Failed to construct kafka producer") as info:
        rest.reset_offsets("x")
    assert "Caused by:" in str(info.value.fix) and "worker_tls" in str(info.value.fix)
    trace = (
        "org.apache.kafka.common.KafkaException: Failed to construct kafka producer\n\tat x.y(Z.java:1)\n"
        "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: SSL trust store password "
        "cannot be specified for PEM format.\n\tat x.y(Z.java:2)\n"
    )
    status = {
        "connector": {"state": "RUNNING", "worker_id": "w:1"},
        "tasks": [{"id": 0, "state": "FAILED", "trace": trace}],
    }
    _Connect.answers[("GET", "/connectors/x/status")] = [(200, status)]
    with pytest.raises(ClusterError, match=r"task 0 of 'x' FAILED .*SSL trust store password cannot") as info:
        rest.wait_running("x", timeout=5)
    assert "worker_tls" in str(info.value.fix)
