"""A small Kafka Connect REST client (standard library only).

Every failure is one of the product's errors: an unreachable worker is a :class:`ClusterError` naming
the URL, refused credentials an :class:`AuthError`, a request Connect rejects a
:class:`ClusterError` quoting Connect's own message. Basic-auth credentials travel in a header; a URL
carrying credentials is refused, and no message ever holds the password.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from dr.base.errors import AuthError, ClusterError, ConfigError

_UNREACHABLE_FIX = "start the Connect cluster or fix the connect url in the stack config"
#: How long a request answered 409 (a rebalance or a concurrent config change) is retried.
_CONFLICT_RETRY_S = 15.0
_UNADDRESSABLE = re.compile(r"[/\\%;\x00-\x1f\x7f]")


_EXCEPTION_LINE = re.compile(r"(?:Caused by: )?((?:[A-Za-z_$][\w$]*\.)+[\w$]*(?:Exception|Error)\b(?::\s*.*)?)")


def root_cause(trace: str) -> str | None:
    """The deepest exception of a Java stack trace (its last ``Caused by:``, else its first line that
    names an exception), as ``class: message`` on one line; None when the text names none."""
    found = None
    for line in trace.splitlines():
        match = _EXCEPTION_LINE.fullmatch(line.strip())
        if match:
            found = match.group(1)
    return found


_CLIENT_BUILD = re.compile(r"Failed to construct kafka (?:producer|consumer|admin)", re.IGNORECASE)
_TLS_STORE = re.compile(r"SSL (?:trust|key) ?store|keystore|truststore|trust certificates|PEM", re.IGNORECASE)


def tls_store_fix(cause: str) -> str | None:
    """What to do when a connector's client could not build its TLS stores (``cause``: a root cause such
    as Kafka's "SSL trust store password cannot be specified for PEM format"), else None."""
    if not _TLS_STORE.search(cause):
        return None
    return _TLS_STORE_FIX


_TLS_STORE_FIX = (
    "a connector's clients could not build their TLS stores: Connect lays the connector's settings over the "
    "workers' own `producer.`/`consumer.`/`admin.` ssl settings — declare the workers' own stores as "
    "`connectClusters[].worker_tls` (runbooks/tls-clusters.md), and check that the CA file (`ca_file`, the same "
    "path on every worker) exists and is readable there"
)


def _clean_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{parts.scheme or 'a scheme-less'} URL is not a Kafka Connect REST URL "
            f"(expected http(s)://host:port, got {_redacted(url)!r}).",
            "set the connect url to http://host:port or https://host:port",
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"the Kafka Connect URL {_redacted(url)!r} carries credentials.",
            "remove them from the URL and pass the REST username/password separately",
        )
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _redacted(url: str) -> str:
    """``url`` without any user-info part (never echo a password from a URL)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return "(unparsable URL)"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _seg(name: str) -> str:
    """One percent-encoded path segment (a ``?``, ``#`` or space in a name stays inside it)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"connector name {name!r} is empty or not text.", "give the connector a name")
    # Connect accepts such names in POST /connectors, but its web server (Jetty 12) answers 400 to
    # any path holding them (even percent-encoded), so the connector could never be read or deleted;
    # a ';' starts a path parameter, which Jetty cuts off the name.
    if _UNADDRESSABLE.search(name) or name == "..":
        raise ConfigError(
            f"connector name {name!r} cannot be used through Kafka Connect's REST API "
            "(its web server refuses '/', '\\', '%', ';', control characters and '..' in a path).",
            "use a name without those characters",
        )
    return urllib.parse.quote(name, safe="")


#: A JSON object as Connect's REST API returns it.
JsonObject = dict[str, Any]


def _object(payload: Any, what: str) -> JsonObject:
    """``payload`` when it is a JSON object, else a :class:`ClusterError` saying what came instead."""
    if not isinstance(payload, dict):
        raise ClusterError(
            f"{what}: Kafka Connect answered {type(payload).__name__}, not a JSON object.",
            "check the url points at a Kafka Connect REST API",
        )
    return payload


class _Unreachable(Exception):
    def __init__(self, url: str, reason: str) -> None:
        super().__init__(reason)
        self.url = url
        self.reason = reason


def _try_again(status: int, message: str) -> bool:
    """Connect's answers that mean "not now": 409 (a rebalance in progress or a concurrent change), and
    the 500 a worker gives while it knows a rebalance is coming (``RebalanceNeededException``: "Request
    cannot be completed because a rebalance is expected" — seen when several connectors of one link are
    created at once)."""
    return status == 409 or (status == 500 and "rebalance is expected" in message)


class ConnectRest:
    """Client of one Kafka Connect cluster's REST API.

    ``fallback_urls`` (keyword) are other workers of the same cluster, tried in order when ``url``
    does not answer — what :meth:`dr.runtime.connect.LocalConnectCluster.rest` passes.
    """

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
        fallback_urls: Sequence[str] = (),
    ) -> None:
        self.url = _clean_url(url)
        self.urls = [self.url, *(u for u in map(_clean_url, fallback_urls) if u != self.url)]
        self.username = username
        self._password = password
        self.timeout = timeout
        if (username is None) != (password is None):
            raise ConfigError(
                "Kafka Connect basic auth needs both a username and a password.",
                "give both, or neither for an unauthenticated REST API",
            )
        self._auth = None
        if username is not None and password is not None:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._auth = f"Basic {token}"

    def __repr__(self) -> str:
        return f"ConnectRest({self.url!r}, username={self.username!r})"

    # ------------------------------------------------------------------ transport
    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "**********") if self._password else text

    def _once(self, base: str, method: str, path: str, body: Any) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw.strip() else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                payload = json.loads(raw) if raw.strip() else None
            except ValueError:
                payload = {"message": raw.decode(errors="replace")[:500]}
            if not isinstance(payload, dict) or not payload.get("message"):
                payload = {"message": f"{exc.reason} (no message from Connect)"}
            return exc.code, payload
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = (
                "connection refused"
                if isinstance(reason, ConnectionRefusedError)
                else f"name not resolved ({reason})"
                if isinstance(reason, socket.gaierror)
                else f"no answer within {self.timeout:g}s"
                if isinstance(reason, TimeoutError)
                else str(reason)
            )
            raise _Unreachable(base, text) from exc
        except TimeoutError as exc:
            raise _Unreachable(base, f"no answer within {self.timeout:g}s") from exc
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Unreachable(base, f"{type(exc).__name__}: {exc}") from exc

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        """One request; the next worker when one does not answer; 409 retried for a while."""
        deadline = time.monotonic() + _CONFLICT_RETRY_S
        while True:
            failures: list[_Unreachable] = []
            for base in self.urls:
                try:
                    status, payload = self._once(base, method, path, body)
                    break
                except _Unreachable as exc:
                    failures.append(exc)
            else:
                where = ", ".join(f.url for f in failures)
                reasons = "; ".join(dict.fromkeys(f.reason for f in failures))
                raise ClusterError(f"Kafka Connect at {where} is unreachable: {reasons}", _UNREACHABLE_FIX)
            if status < 300:
                return payload
            message = self._scrub(str(payload.get("message")))
            what = f"{method} {urllib.parse.unquote(path)} on Kafka Connect at {base}"
            if status == 404 and missing_ok:
                return None
            if status in (401, 403):
                who = f"user {self.username!r}" if self.username else "a request without credentials"
                raise AuthError(
                    f"{what}: HTTP {status}, Kafka Connect refused {who}: {message}",
                    "check the Connect REST username and password (local: the estate's "
                    "credentials.json, user connect-rest)",
                )
            if _try_again(status, message) and time.monotonic() < deadline:
                time.sleep(0.5)  # a rebalance or a concurrent change: Connect asks to try again
                continue
            if status == 404:
                raise ClusterError(
                    f"{what}: not found (HTTP 404): {message}",
                    "check the connector name (`GET /connectors` lists them)",
                )
            if _CLIENT_BUILD.search(message):
                # Connect's answer drops the cause ("Failed to construct kafka producer"); its log keeps it
                raise ClusterError(
                    f"{what} failed with HTTP {status}: {message} — Connect could not build the connector's "
                    "Kafka clients from its overrides over the workers' own producer./consumer./admin. settings",
                    "read the `Caused by:` of that error in the Connect worker's log; for a TLS store cause ("
                    f"`SSL trust store ...`): {_TLS_STORE_FIX}",
                )
            raise ClusterError(
                f"{what} failed with HTTP {status}: {message}", "fix the request or read the Connect workers' logs"
            )

    # ------------------------------------------------------------------ reads
    def info(self) -> JsonObject:
        """``GET /``: the worker's version, commit and Kafka cluster id."""
        return _object(self._call("GET", "/"), "GET /")

    def connectors(self) -> list[str]:
        """Names of every connector of the cluster."""
        return sorted(self._call("GET", "/connectors"))

    def config(self, name: str) -> dict[str, str] | None:
        """The stored configuration of ``name`` (config-provider references unresolved), or None."""
        config = self._call("GET", f"/connectors/{_seg(name)}/config", missing_ok=True)
        if config is None:
            return None
        return {str(k): str(v) for k, v in _object(config, f"the config of {name!r}").items()}

    def status(self, name: str) -> JsonObject | None:
        """``GET /connectors/{name}/status`` (connector and task states, worker ids), or None."""
        status = self._call("GET", f"/connectors/{_seg(name)}/status", missing_ok=True)
        return None if status is None else _object(status, f"the status of {name!r}")

    def validate_raw(self, config: dict[str, str]) -> JsonObject:
        """Connect's whole validation answer for ``config`` (values as the worker resolved them:
        may hold secrets — never print it)."""
        plugin = config.get("connector.class")
        if not plugin:
            raise ConfigError("the connector config has no connector.class.", "set connector.class")
        body = {"name": "kdr-validate", **{k: str(v) for k, v in config.items()}}
        return _object(self._call("PUT", f"/connector-plugins/{_seg(plugin)}/config/validate", body), "validate")

    def validate(self, config: dict[str, str]) -> list[str]:
        """What Connect finds wrong with ``config``, as ``["field: message", ...]``; ``[]`` when valid."""
        plugin = config.get("connector.class")
        if not plugin:
            raise ConfigError("the connector config has no connector.class.", "set connector.class")
        # Connect insists on a name; configs rendered for PUT /connectors/{name}/config have none.
        body = {"name": "kdr-validate", **{k: str(v) for k, v in config.items()}}
        result = _object(self._call("PUT", f"/connector-plugins/{_seg(plugin)}/config/validate", body), "validate")
        errors: list[str] = []
        for item in result.get("configs", []):
            value = item.get("value", {})
            errors += [f"{value.get('name')}: {self._scrub(e)}" for e in value.get("errors", [])]
        return errors

    # ------------------------------------------------------------------ changes
    def put_config(self, name: str, config: dict[str, str]) -> None:
        """Create ``name`` or replace its configuration."""
        self._call("PUT", f"/connectors/{_seg(name)}/config", {k: str(v) for k, v in config.items()})

    def create_stopped(self, name: str, config: dict[str, str]) -> None:
        """Create ``name`` in the STOPPED state (KIP-980, Kafka ≥ 3.7): configured, no tasks yet."""
        body = {"name": name, "config": {k: str(v) for k, v in config.items()}, "initial_state": "STOPPED"}
        self._call("POST", "/connectors", body)

    def offsets(self, name: str) -> list[JsonObject]:
        """The connector's stored source offsets (``GET /connectors/{name}/offsets``, KIP-875)."""
        payload = _object(self._call("GET", f"/connectors/{_seg(name)}/offsets"), f"the offsets of {name!r}")
        return [_object(o, f"an offset of {name!r}") for o in payload.get("offsets", [])]

    def reset_offsets(self, name: str) -> None:
        """Forget every stored offset of the (stopped) connector ``name`` (KIP-875)."""
        self._call("DELETE", f"/connectors/{_seg(name)}/offsets")

    def stop(self, name: str) -> None:
        """Stop ``name``: no tasks, configuration and offsets kept (Kafka ≥ 3.5)."""
        self._call("PUT", f"/connectors/{_seg(name)}/stop")

    def resume(self, name: str) -> None:
        """Resume a paused or stopped connector."""
        self._call("PUT", f"/connectors/{_seg(name)}/resume")

    def restart(self, name: str, *, include_tasks: bool = True, only_failed: bool = True) -> None:
        """Restart the connector (and its tasks; by default only what failed)."""
        query = urllib.parse.urlencode(
            {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        )
        self._call("POST", f"/connectors/{_seg(name)}/restart?{query}")

    def delete(self, name: str) -> None:
        """Delete ``name``; a connector that does not exist is fine."""
        self._call("DELETE", f"/connectors/{_seg(name)}", missing_ok=True)

    # ------------------------------------------------------------------ waits
    def wait_running(self, name: str, timeout: float = 60.0) -> JsonObject:
        """Wait until the connector and each of its (at least one) tasks run; return the status.

        A FAILED connector or task raises at once, quoting the first line of its trace.
        """
        return self._wait(name, "RUNNING", timeout, need_tasks=True)

    def wait_state(self, name: str, state: str, timeout: float, *, fail_fast: bool = True) -> JsonObject:
        """Wait until the connector (and every task it has) is in ``state``, e.g. ``STOPPED``; with
        ``fail_fast`` a FAILED connector or task raises at once (off: a task that failed before a stop)."""
        return self._wait(name, state.upper(), timeout, need_tasks=False, fail_fast=fail_fast)

    def _wait(self, name: str, state: str, timeout: float, need_tasks: bool, fail_fast: bool = True) -> JsonObject:
        deadline = time.monotonic() + timeout
        status: JsonObject | None = None
        while True:
            status = self.status(name)
            if status is not None:
                connector = status.get("connector", {})
                tasks = status.get("tasks", [])
                if state != "FAILED" and fail_fast:
                    for part, what in ((connector, "connector"), *((t, f"task {t.get('id')}") for t in tasks)):
                        if part.get("state") == "FAILED":
                            trace = (part.get("trace") or "").strip()
                            first = self._scrub(root_cause(trace) or trace.split("\n", 1)[0] or "(no trace)")
                            tls = tls_store_fix(first)
                            raise ClusterError(
                                f"Kafka Connect {what} of {name!r} FAILED on {part.get('worker_id')}: {first}",
                                (f"{tls}; " if tls else "")
                                + f"fix the cause (GET {self.url}/connectors/{_seg(name)}/status has the "
                                "whole trace), then run again",
                            )
                if (
                    connector.get("state") == state
                    and all(t.get("state") == state for t in tasks)
                    and (tasks or not need_tasks)
                ):
                    return status
            if time.monotonic() >= deadline:
                now = (
                    "absent"
                    if status is None
                    else f"connector {status.get('connector', {}).get('state')}, tasks "
                    f"{[t.get('state') for t in status.get('tasks', [])]}"
                )
                raise ClusterError(
                    f"Kafka Connect connector {name!r} at {self.url} is not {state} after {timeout:.0f}s ({now}).",
                    "read the Connect workers' logs, or wait longer",
                )
            time.sleep(0.25)
