"""What an internal topic is: the one definition validation, grants and verification share.

A topic is internal when Kafka, MirrorMaker 2, Kafka Connect or the platform keeps its own state in it:

* Kafka's ``__*`` topics (``__consumer_offsets``, ``__transaction_state``…) and Confluent Platform's
  ``_confluent*`` and ``_schemas`` — a topic that merely starts with one ``_`` (``_ledger``) is not;
* MirrorMaker 2's: ``mm2-*`` (``mm2-configs|offsets|status.<alias>.internal``,
  ``mm2-offset-syncs.<alias>.internal``), any ``….internal``/``…-internal`` (``<alias>.checkpoints.internal``),
  ``heartbeats`` and ``<alias>.heartbeats``, and anything starting with ``.``;
* Kafka Connect's: ``connect-configs|offsets|status`` and ``connect-<name>-configs|offsets|status`` (the
  names the product gives a Connect cluster's topics, :class:`dr.runtime.connect.ConnectSpec`).

:func:`why_internal` says whether one name is internal (validation refuses such a declared topic; the
verification never compares one by default). A prefixed ACL reaches every topic whose name starts with
its prefix, so :meth:`InternalTopics.reached_by` names what a prefix would reach: the internal families
whose names may start with it (``m`` reaches every ``mm2-…``, ``_`` every ``__…``, ``c`` every
``connect-…-configs``) and the concrete internal topics of one estate, built from its cluster aliases and
Connect clusters (``A`` reaches ``A.checkpoints.internal``). Pure: no client, no topology.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FAMILIES", "InternalTopics", "is_internal", "why_internal"]

KAFKA_TOPICS = {
    "__consumer_offsets": "Kafka's consumer offsets topic",
    "__transaction_state": "Kafka's transaction state topic",
    "__share_group_state": "Kafka's share group state topic",
    "__cluster_metadata": "the KRaft metadata log",
}

FAMILIES: dict[str, str] = {
    "__": "starts with '__', which Kafka reserves for its internal topics",
    "_confluent": "starts with '_confluent', which Confluent Platform uses for its internal topics",
    "mm2-": "starts with 'mm2-', which MirrorMaker 2 uses for its internal topics (and the replicator may write)",
    "connect-": "is a Kafka Connect internal topic name (connect-[<name>-]configs|offsets|status)",
    ".": "starts with '.', which MirrorMaker 2 treats as an internal topic: it would never be replicated",
}
"""Every reserved family whose members start with a fixed text, and why (a prefixed grant whose prefix
and the family's start overlap could reach a member)."""

_CONNECT = re.compile(r"connect-(?:.+-)?(?:configs|offsets|status)")
_CONNECT_KINDS = ("configs", "offsets", "status")
_MM2_INTERNAL = ("mm2-configs", "mm2-offsets", "mm2-status", "mm2-offset-syncs")


def why_internal(name: str) -> str | None:
    """Why ``name`` is an internal topic (a phrase to follow the quoted name), or None when it is not."""
    if name in KAFKA_TOPICS:
        return f"is {KAFKA_TOPICS[name]}"
    if name == "_schemas":
        return "is Schema Registry's internal topic"
    if name == "heartbeats" or name.endswith(".heartbeats"):
        return "is a MirrorMaker 2 heartbeats topic name"
    if _CONNECT.fullmatch(name):
        return FAMILIES["connect-"]
    for start, why in FAMILIES.items():
        if start != "connect-" and name.startswith(start):
            return why
    if name.endswith((".internal", "-internal")):
        return (
            "ends with '.internal'/'-internal': MirrorMaker 2 names its internal topics so "
            "(<alias>.checkpoints.internal, mm2-*.internal) and skips such topics"
        )
    return None


def is_internal(name: str) -> bool:
    """True when ``name`` is an internal topic (:func:`why_internal`)."""
    return why_internal(name) is not None


@dataclass(frozen=True)
class InternalTopics:
    """The internal topics of one estate: its cluster aliases (every cluster, since a failover may link any
    of them) and its Connect clusters' names."""

    aliases: tuple[str, ...] = ()
    connect_clusters: tuple[str, ...] = ()

    @classmethod
    def of(cls, aliases: Iterable[str], connect_clusters: Iterable[str] = ()) -> InternalTopics:
        """The internal topics of an estate with these cluster aliases and Connect cluster names."""
        return cls(tuple(aliases), tuple(connect_clusters))

    def names(self) -> list[str]:
        """Every concrete internal topic the estate's brokers, links and Connect clusters may create."""
        found = [*KAFKA_TOPICS, "_schemas", "heartbeats", *(f"connect-{kind}" for kind in _CONNECT_KINDS)]
        for alias in self.aliases:
            found += [f"{kind}.{alias}.internal" for kind in _MM2_INTERNAL]
            found += [f"{alias}.checkpoints.internal", f"{alias}.heartbeats"]
        for cc in self.connect_clusters:
            found += [f"connect-{cc}-{kind}" for kind in _CONNECT_KINDS]
        return found

    def reached_by(self, prefix: str) -> list[str]:
        """What a prefixed grant on ``prefix`` would reach: each family (``'mm2-*'``) and concrete internal
        topic whose name may start with ``prefix``, quoted, in a stable order (empty: none)."""
        reached = [f"'{start}*'" for start in FAMILIES if start.startswith(prefix) or prefix.startswith(start)]
        covered = {start for start in FAMILIES if start.startswith(prefix) or prefix.startswith(start)}
        for name in (*self.names(), prefix):
            if name.startswith(prefix) and is_internal(name) and not any(name.startswith(s) for s in covered):
                quoted = repr(name)
                if quoted not in reached:
                    reached.append(quoted)
        return reached
