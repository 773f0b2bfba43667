"""``kafka-dr:failover_policy``: what the per-site controller (``drctl controller``, issue 43) does when it
finds a cluster down, and the witness and metrics port it uses.

``mode: manual`` (the default) detects and alerts, never acts. ``mode: automatic`` may start the stack's
unplanned failover itself; it needs a witness (an existing consensus store: etcd v3, or the team's
PostgreSQL as a single witness), a declared ``max_rpo_records``, and a ``detect_after_s`` no shorter than
the witness lease's TTL plus the margin: the active site fences itself when it cannot renew its lease
before ``lease_ttl_s - margin_s``, and the passive site may act only once that lease has surely expired.

The rules that need the rest of the stack (a metrics port per declared cluster, no port used twice) are
in :func:`policy_violations`; a value that breaks a rule of its own is refused where it is read, naming
the field (``failover_policy.detect_after_s: ...``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from dr.base.types import Model

__all__ = ["METRICS_ADDRESS", "FailoverPolicy", "Witness", "policy_violations"]

METRICS_ADDRESS = "127.0.0.1"
"""Where every controller serves its metrics: loopback only (a local agent or a tunnel scrapes it)."""


class _Policy(Model):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)


class Witness(_Policy):
    """The consensus store that says which site's controller holds the stack's lease.

    ``kind: etcd`` (three members on three sites is the recommended deployment): ``endpoints`` are the
    members' client URLs (``http://host:2379``). ``kind: postgres``: the stack's team database (the
    ``postgres://`` Pulumi backend) holds the lease — one server, so it is a single witness: use it
    when a third etcd site is more than the team runs."""

    kind: Literal["etcd", "postgres"]
    endpoints: list[str] = Field(default_factory=list, max_length=9)
    """etcd only: the members' client URLs, ``http://host:port`` or ``https://host:port``."""
    prefix: str = Field(default="/kafka-dr/", min_length=1, max_length=200, pattern=r"^/[\x21-\x7e]*/$")
    """etcd only: the key prefix the product's keys live under (``<prefix><project>/<stack>/leader``)."""

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, endpoints: list[str]) -> list[str]:
        for url in endpoints:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
                raise ValueError(f"{url!r} is not an etcd client URL; write http://host:port (or https://)")
            if parts.path not in ("", "/") or parts.query or parts.username:
                raise ValueError(f"{url!r} carries a path, query or user; write only http://host:port")
        if len(set(endpoints)) != len(endpoints):
            raise ValueError("an endpoint is listed twice")
        return endpoints

    @model_validator(mode="after")
    def _endpoints_match_kind(self) -> Witness:
        if self.kind == "etcd" and not self.endpoints:
            raise ValueError("an etcd witness needs its members' client URLs under `endpoints`")
        if self.kind == "postgres" and self.endpoints:
            raise ValueError(
                "a postgres witness is the stack's team database (its postgres:// backend): remove `endpoints`"
            )
        return self


class FailoverPolicy(_Policy):
    """The controller's policy (see the module doc); every duration in seconds."""

    mode: Literal["manual", "automatic"] = "manual"
    """``manual``: detect and alert, never act. ``automatic``: may start the unplanned failover itself."""
    detect_after_s: float = Field(default=30.0, gt=0, le=86_400)
    """How long a cluster must stay down (every probe failing) before it counts as lost."""
    lease_ttl_s: float = Field(default=10.0, ge=2, le=3_600)
    """The witness lease's time to live: a holder that stops renewing loses it after this long."""
    margin_s: float = Field(default=5.0, ge=0, le=3_600)
    """Safety margin on the lease: the holder fences itself at ``lease_ttl_s - margin_s`` without a renewal; the
    other site waits ``margin_s`` beyond the expiry (clock drift, pauses)."""
    max_rpo_records: int | None = Field(default=None, ge=0)
    """Automatic mode: above this many records of last known lag the controller refuses to promote and pages."""
    cooldown_s: float = Field(default=3_600.0, ge=0, le=30 * 86_400)
    """At most one automatic failover per this many seconds."""
    witness: Witness | None = None
    """The consensus store holding the lease; required by ``automatic``."""
    metrics_ports: dict[str, int] = Field(default_factory=dict)
    """Cluster name → the port its controller serves Prometheus metrics on, at 127.0.0.1."""
    parity_every_s: float = Field(default=300.0, ge=0, le=86_400)
    """How often the controller of a link's target site compares the clusters the links join, as ``drctl
    status --parity`` does (topic configurations, SCRAM users, ACLs, quotas): each difference is a readiness
    problem (``kdr_ready 0``) and counts in ``kdr_parity_differences``. 0 turns it off; else at least 5."""

    @field_validator("parity_every_s")
    @classmethod
    def _parity_every(cls, seconds: float) -> float:
        if 0 < seconds < 5:
            raise ValueError("a parity check reads every linked cluster and starts a JVM: 0 (off) or at least 5 s")
        return seconds

    @property
    def broker_fence(self) -> bool:
        """Whether the stack's brokers run the broker-side lease fence (``automatic`` only): an application
        write needs the lease permit the site's controller renews (runbooks/controller.md, section 5)."""
        return self.mode == "automatic"

    @field_validator("metrics_ports")
    @classmethod
    def _ports(cls, ports: dict[str, int]) -> dict[str, int]:
        for name, port in ports.items():
            if not 1024 <= port <= 65_535:
                raise ValueError(f"port {port} of {name!r} is outside 1024-65535")
        return ports

    @model_validator(mode="after")
    def _coherent(self) -> FailoverPolicy:
        if self.margin_s >= self.lease_ttl_s:
            raise ValueError(
                f"margin_s ({self.margin_s:g}) must be shorter than lease_ttl_s ({self.lease_ttl_s:g}): the holder "
                "fences itself at lease_ttl_s - margin_s"
            )
        if self.detect_after_s < self.lease_ttl_s + self.margin_s:
            raise ValueError(
                f"detect_after_s ({self.detect_after_s:g}) is shorter than lease_ttl_s + margin_s "
                f"({self.lease_ttl_s:g} + {self.margin_s:g}): the passive site could act while the active one "
                "still holds its lease; raise detect_after_s or lower the lease's TTL"
            )
        if self.mode == "automatic" and self.witness is None:
            raise ValueError(
                "mode automatic needs a witness (an etcd cluster, or the team's postgres); declare "
                "`witness: {kind: etcd, endpoints: [...]}` or keep mode manual"
            )
        if self.mode == "automatic" and self.max_rpo_records is None:
            raise ValueError(
                "mode automatic needs max_rpo_records: how many records a failover without a person may lose"
            )
        return self


def policy_violations(policy: FailoverPolicy, clusters: Iterable[str]) -> list[tuple[str, str, str]]:
    """(field, problem, fix) for each rule the policy breaks against the stack's ``clusters``."""
    names = list(clusters)
    found: list[tuple[str, str, str]] = []
    for name in policy.metrics_ports:
        if name not in names:
            found.append(
                (
                    f"failover_policy.metrics_ports.{name}",
                    f"{name!r} is not a declared cluster",
                    f"use a cluster of the stack: {', '.join(names)}",
                )
            )
    seen: dict[int, str] = {}
    for name, port in policy.metrics_ports.items():
        if port in seen:
            found.append(
                (
                    f"failover_policy.metrics_ports.{name}",
                    f"port {port} is also {seen[port]}'s",
                    "give each cluster's controller a port of its own",
                )
            )
        seen.setdefault(port, name)
    return found
