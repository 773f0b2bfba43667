"""The lease in an etcd v3 cluster, spoken through etcd's JSON gateway (``/v3/...`` over HTTP).

Why the gateway and not a Python client: the maintained gRPC clients on PyPI pin old ``grpcio`` and
``protobuf`` releases (python-etcd3 has had no release since 2020); the gateway is part of every etcd
server since 3.3, needs nothing beyond the standard library, and its JSON is the gRPC API's own messages
(keys and values base64, 64-bit integers as strings).

The lease is etcd's own: ``lease/grant`` with the TTL, then one transaction that puts the leader key
with that lease **only if the key does not exist** (``create_revision == 0``), so two controllers racing
get one winner. The key's create revision is the fencing token: every new holder creates the key anew,
at a higher revision of the whole store. ``lease/keepalive`` renews; a holder that stops renewing loses
the lease, and with it the key, after the TTL — etcd's leader decides that, not a clock here.

Observers' verdicts live under ``<prefix><project>/<stack>/observers/<name>``, each put with a lease of
its own TTL (etcd deletes a verdict nobody renews); the last automatic failover under
``<prefix><project>/<stack>/last-automatic`` (no lease: the cooldown outlives every controller).

Each request goes to the first member that answers (a member killed or cut off is skipped); when none
does, :class:`~dr.base.errors.ClusterError` names them all.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any

from dr.base.errors import ClusterError
from dr.controller.witness import Holding

__all__ = ["EtcdWitness"]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode()


class EtcdWitness:
    """The stack's lease in the etcd cluster at ``endpoints`` (see the module doc)."""

    def __init__(self, endpoints: list[str], key: str, ttl_s: float) -> None:
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.key = key
        self.ttl_s = ttl_s
        # a member without quorum holds a request until etcd's own timeout: give up on it sooner
        self.timeout_s = max(0.5, min(2.0, ttl_s / 4))

    def describe(self) -> str:
        """``etcd <endpoints> key <key>``."""
        return f"etcd {','.join(self.endpoints)} key {self.key}"

    # ------------------------------------------------------------------ the protocol
    def acquire(self, holder: str) -> Holding | None:
        """Grant a lease and put the leader key with it if the key is absent; None (the lease revoked) when held."""
        lease_id = int(self._call("/v3/lease/grant", {"TTL": max(1, round(self.ttl_s))})["ID"])
        now = time.time()
        value = json.dumps({"holder": holder, "acquired_at": now})
        answer = self._call(
            "/v3/kv/txn",
            {
                "compare": [{"key": _b64(self.key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                "success": [{"request_put": {"key": _b64(self.key), "value": _b64(value), "lease": str(lease_id)}}],
                "failure": [],
            },
        )
        if not answer.get("succeeded"):
            self._revoke(lease_id)
            return None
        return Holding(holder=holder, token=int(answer["header"]["revision"]), acquired_at=now, lease_id=lease_id)

    def renew(self, holding: Holding) -> bool:
        """Keep the lease alive; False when it expired or the key is no longer this holding's."""
        answer = self._call("/v3/lease/keepalive", {"ID": str(holding.lease_id)})
        if int(answer.get("result", {}).get("TTL", 0)) <= 0:
            return False
        now = self.current()
        return now is not None and now.token == holding.token

    def current(self) -> Holding | None:
        """The holder of the leader key, or None when the key is absent."""
        answer = self._call("/v3/kv/range", {"key": _b64(self.key)})
        kvs = answer.get("kvs") or []
        if not kvs:
            return None
        kv = kvs[0]
        value = json.loads(_unb64(kv.get("value", "")) or "{}")
        return Holding(
            holder=str(value.get("holder", "?")),
            token=int(kv["create_revision"]),
            acquired_at=float(value.get("acquired_at", 0.0)),
            lease_id=int(kv.get("lease", 0)),
        )

    def release(self, holding: Holding) -> None:
        """Revoke the holding's lease (etcd deletes the key with it)."""
        self._revoke(holding.lease_id)

    def close(self) -> None:
        """Nothing to close: every request is its own HTTP connection."""

    @property
    def _base(self) -> str:
        return self.key.rsplit("/", 1)[0]

    def publish(self, observer: str, states: dict[str, str], ttl_s: float) -> None:
        """Put ``observer``'s verdict with a lease of ``ttl_s`` (see the module doc)."""
        lease_id = int(self._call("/v3/lease/grant", {"TTL": max(1, round(ttl_s))})["ID"])
        value = json.dumps({"states": states, "at": time.time()})
        self._call(
            "/v3/kv/put",
            {"key": _b64(f"{self._base}/observers/{observer}"), "value": _b64(value), "lease": str(lease_id)},
        )

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Every live verdict under ``observers/`` (a prefix range)."""
        prefix = f"{self._base}/observers/"
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        answer = self._call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(end)})
        found: dict[str, dict[str, str]] = {}
        for kv in answer.get("kvs") or []:
            name = _unb64(kv["key"])[len(prefix) :]
            doc = json.loads(_unb64(kv.get("value", "")) or "{}")
            found[name] = {str(k): str(v) for k, v in dict(doc.get("states") or {}).items()}
        return found

    def mark_automatic(self, holder: str, token: int) -> None:
        """Put ``last-automatic`` (no lease)."""
        value = json.dumps({"at": time.time(), "holder": holder, "token": token})
        self._call("/v3/kv/put", {"key": _b64(f"{self._base}/last-automatic"), "value": _b64(value)})

    def last_automatic(self) -> float | None:
        """The ``at`` of ``last-automatic``, or None."""
        kvs = self._call("/v3/kv/range", {"key": _b64(f"{self._base}/last-automatic")}).get("kvs") or []
        return float(json.loads(_unb64(kvs[0].get("value", "")) or "{}").get("at", 0.0)) if kvs else None

    # ------------------------------------------------------------------ transport
    def _revoke(self, lease_id: int) -> None:
        self._call("/v3/lease/revoke", {"ID": str(lease_id)}, absent_ok=True)

    def _call(self, path: str, body: dict[str, Any], *, absent_ok: bool = False) -> dict[str, Any]:
        """POST ``body`` to ``path`` on the first member that answers; ClusterError when none does."""
        data = json.dumps(body).encode()
        failures: list[str] = []
        for endpoint in self.endpoints:
            request = urllib.request.Request(
                endpoint + path, data=data, headers={"Content-Type": "application/json"}, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 — http(s) only (validated)
                    text = response.read().decode()
            except urllib.error.HTTPError as exc:
                detail = _gateway_error(exc)
                if absent_ok and "not found" in detail:
                    return {}
                failures.append(f"{endpoint}: {detail}")
                continue
            except (OSError, urllib.error.URLError) as exc:
                reason = getattr(exc, "reason", exc)
                failures.append(f"{endpoint}: {reason}")
                continue
            # keepalive answers as a stream: one JSON document per line, the first is ours
            return dict(json.loads(text.splitlines()[0] if text else "{}"))
        raise ClusterError(
            f"the witness (etcd) does not answer: {'; '.join(failures)}",
            "start the etcd members or restore the network to them (a majority must run); until then no "
            "controller takes or renews the lease, and automatic failover is off",
        )


def _gateway_error(exc: urllib.error.HTTPError) -> str:
    try:
        doc = json.loads(exc.read().decode() or "{}")
    except (ValueError, OSError):
        doc = {}
    return f"HTTP {exc.code}: {doc.get('error') or doc.get('message') or exc.reason}"
