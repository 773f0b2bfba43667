"""The rules a topology must satisfy, checked all at once at plan time.

Each rule is a small function yielding :class:`Violation` s; :func:`find_violations` runs them all
and :func:`raise_for_violations` turns any into one :class:`~dr.base.errors.TopologyError` whose message
lists every violation as ``field path: problem — fix``.

A link that no longer runs (a ``cluster-link`` kept ``promoted``/``failed-over`` after a failover,
see :class:`~dr.topology.model.LinkState`) replicates nothing: the rules about which roles a link
may join, what feeds a passive cluster, and cycles look only at running links.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import re
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from dr.base.errors import TopologyError
from dr.base.pattern_safety import backtracking_problem, name_matcher
from dr.kafka.internal_topics import why_internal
from dr.runtime.reserved import CONNECT_USER
from dr.topology.architectures import ARCHITECTURES
from dr.topology.endpoint_rules import endpoint_problems
from dr.topology.failover_policy import policy_violations
from dr.topology.java_regex import JavaVerdict, java_verdicts, same_in_both
from dr.topology.kinds import PORT_WINDOW, Delivery, Engine, Kind, Profile, Role
from dr.topology.oauth_rules import oauth_problems
from dr.topology.tls_rules import tls_problems
from dr.topology.topics import consumes_remote, remote_copies
from dr.topology.violation import Violation

if TYPE_CHECKING:
    from dr.topology.model import Application, Cluster, Link, Topology

__all__ = ["Violation", "find_violations", "raise_for_violations"]

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_HOST_PORT = re.compile(r"[^\s:,]+:\d{1,5}|\[[0-9a-fA-F:.]+\]:\d{1,5}")
_FIRST_PORT, _LAST_PORT = 1024, 32767
"""Local ports: above the privileged range, below Linux's ephemeral range (32768+), where any client
socket of the machine may hold a port a cluster is about to bind."""
_MAX_PORT = 65535
_DEFAULT_BASE_PORT = 19100
_RULE_OWNED_CONFIGS = {"min.insync.replicas": "min_insync_replicas", "replication.factor": "replication_factor"}

# Principal names become SCRAM user names, ``User:<name>`` ACL principals, quoted JAAS values and
# client file names: a conservative alphabet keeps every one of those safe without escaping.
_PRINCIPAL = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PRINCIPAL_RULE = "use 1-64 characters from [A-Za-z0-9._-] (and not '.' or '..')"
# The names of dr.runtime.credentials (not imported: the topology stays free of the runtime).
_BROKER_USER, _ADMIN_USER, _REPLICATOR_USER = "broker", "admin", "replicator"
_BUILT_IN_PRINCIPALS = {
    _BROKER_USER: "the inter-broker super user of local clusters (super.users)",
    _ADMIN_USER: "the admin super user of local clusters (super.users), whatever principals.admin says",
    _REPLICATOR_USER: "the user MirrorMaker 2 runs as on local links, whatever principals.replicator says",
    CONNECT_USER: "the user local Kafka Connect workers run as on their home cluster",
}
_RACK = re.compile(r"[A-Za-z0-9._-]{1,64}")
_LINK_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")

_MAX_PARTITIONS = 100_000
"""Kafka accepts up to 2^31-1 partitions per topic, but KRaft clusters are sized for a few hundred
thousand partitions in all: more than 100 000 in one topic is a typo, not a design."""
_MAX_LOCAL_REPLICAS_PER_BROKER = 10_000
"""A local broker keeps two memory-mapped index files and open segment files per partition replica;
beyond 10 000 replicas per broker one machine runs out of maps (vm.max_map_count defaults to 65530)."""
_MAX_REPLICATION_FACTOR = 32_767  # CreateTopics carries the replication factor as an INT16
_MAX_GROUP_NAME = 255

_GROUP_FILTER_PREFIXES = ("console-consumer-", "connect-", "__")
"""MirrorMaker 2's default ``groups.exclude``: offsets of these groups are never synced."""

# Topic-level configs of Kafka 4.x (LogConfig.configNames() of the pinned Kafka 4.3.1, less the
# internal internal.segment.bytes): name -> (type, minimum, maximum). INT is 32-bit, LONG 64-bit.
_INT, _LONG, _DOUBLE, _BOOLEAN, _CHOICE, _REPLICAS = "int", "long", "double", "boolean", "choice", "replicas"
_INT_RANGE, _LONG_RANGE = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
_TOPIC_CONFIGS: dict[str, tuple[str, float | None, float | None]] = {
    "cleanup.policy": (_CHOICE, None, None),
    "compression.type": (_CHOICE, None, None),
    "compression.gzip.level": (_INT, 1, 9),  # or -1 (the codec's default)
    "compression.lz4.level": (_INT, 1, 17),
    "compression.zstd.level": (_INT, -131072, 22),
    "delete.retention.ms": (_LONG, 0, None),
    "file.delete.delay.ms": (_LONG, 0, None),
    "flush.messages": (_LONG, 1, None),
    "flush.ms": (_LONG, 0, None),
    "follower.replication.throttled.replicas": (_REPLICAS, None, None),
    "index.interval.bytes": (_INT, 0, None),
    "leader.replication.throttled.replicas": (_REPLICAS, None, None),
    "local.retention.bytes": (_LONG, -2, None),
    "local.retention.ms": (_LONG, -2, None),
    "max.compaction.lag.ms": (_LONG, 1, None),
    "max.message.bytes": (_INT, 0, None),
    "message.timestamp.after.max.ms": (_LONG, 0, None),
    "message.timestamp.before.max.ms": (_LONG, 0, None),
    "message.timestamp.type": (_CHOICE, None, None),
    "min.cleanable.dirty.ratio": (_DOUBLE, 0, 1),
    "min.compaction.lag.ms": (_LONG, 0, None),
    "min.insync.replicas": (_INT, 1, None),  # refused in configs: the topic has its own field
    "preallocate": (_BOOLEAN, None, None),
    "remote.log.copy.disable": (_BOOLEAN, None, None),
    "remote.log.delete.on.disable": (_BOOLEAN, None, None),
    "remote.storage.enable": (_BOOLEAN, None, None),
    "retention.bytes": (_LONG, None, None),  # Kafka sets no minimum: any negative value means unlimited
    "retention.ms": (_LONG, -1, None),
    "segment.bytes": (_INT, 1048576, None),
    "segment.index.bytes": (_INT, 4, None),
    "segment.jitter.ms": (_LONG, 0, None),
    "segment.ms": (_LONG, 1, None),
    "unclean.leader.election.enable": (_BOOLEAN, None, None),
}
_CHOICES = {
    "cleanup.policy": ("delete", "compact", "compact,delete", "delete,compact"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
}
_REMOVED_CONFIGS = {
    "message.downconversion.enable": ("was removed in Kafka 4.0 (brokers no longer down-convert records)", "remove it"),
    "message.format.version": ("was removed in Kafka 4.0 (only the v2 record format remains)", "remove it"),
    "message.timestamp.difference.max.ms": (
        "was removed in Kafka 4.0",
        "use message.timestamp.before.max.ms and message.timestamp.after.max.ms instead",
    ),
    "internal.segment.bytes": ("is internal to Kafka (its own tests use it)", "use segment.bytes (at least 1048576)"),
}
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def _names(items: list[Cluster]) -> str:
    return ", ".join(repr(c.name) for c in items) or "none declared"


# -- names ------------------------------------------------------------------------------------


def _duplicate_names(t: Topology) -> Iterator[Violation]:
    collections = (
        ("clusters", [c.name for c in t.clusters]),
        ("topics", [topic.name for topic in t.topics]),
        ("principals.applications", [a.name for a in t.principals.applications]),
        ("links", [lk.name for lk in t.links]),
    )
    for field, names in collections:
        first: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in first:
                yield Violation(
                    f"{field}[{i}].name",
                    f"{name!r} is already used by {field}[{first[name]}]",
                    "give each one a unique name",
                )
            else:
                first[name] = i


def _valid_principal(name: str) -> bool:
    return bool(_PRINCIPAL.fullmatch(name)) and name not in (".", "..")


def _principals(t: Topology) -> Iterator[Violation]:
    """Principal names: a safe alphabet, and no application taking a user the product runs as."""
    p = t.principals
    declared = [("principals.admin", p.admin), ("principals.replicator", p.replicator)]
    declared += [(f"principals.applications[{i}].name", app.name) for i, app in enumerate(p.applications)]
    declared += [
        (f"clusters[{i}].admin_username", c.admin_username)
        for i, c in enumerate(t.clusters)
        if c.admin_username is not None
    ]
    for path, name in declared:
        if not _valid_principal(name):
            yield Violation(
                path,
                f"{name!r} is not a valid principal name (it becomes a SCRAM user, a User: ACL principal "
                "and a quoted value in JAAS configs)",
                _PRINCIPAL_RULE,
            )
    if p.admin == p.replicator:
        yield Violation(
            "principals.replicator",
            f"{p.replicator!r} is also the admin principal",
            "use a separate replicator user so that its ACLs stay minimal",
        )
    for path, name, own in (
        ("principals.admin", p.admin, _ADMIN_USER),
        ("principals.replicator", p.replicator, _REPLICATOR_USER),
    ):
        if name in _BUILT_IN_PRINCIPALS and name != own:
            yield Violation(
                path,
                f"{name!r} is {_BUILT_IN_PRINCIPALS[name]}",
                f"use another name (the default is {own!r})",
            )
    reserved = dict(_BUILT_IN_PRINCIPALS)
    reserved[p.admin] = "the principals.admin principal"
    reserved[p.replicator] = "the principals.replicator principal"
    for i, c in enumerate(t.clusters):
        if c.admin_username is not None:
            reserved.setdefault(
                c.admin_username, f"the admin user of cluster {c.name!r} (clusters[{i}].admin_username)"
            )
    for i, app in enumerate(p.applications):
        if app.name in reserved:
            yield Violation(
                f"principals.applications[{i}].name",
                f"{app.name!r} is already {reserved[app.name]}; an application with that name would share "
                "(and reset) its credentials",
                "give the application a principal name of its own",
            )
    for i, c in enumerate(t.clusters):
        if c.admin_username is not None and c.admin_username == p.replicator:
            yield Violation(
                f"clusters[{i}].admin_username",
                f"{c.admin_username!r} is also principals.replicator, whose password the program sets "
                f"on cluster {c.name!r}",
                "use a separate replicator user (principals.replicator)",
            )


def _consumer_groups(t: Topology) -> Iterator[Violation]:
    for i, app in enumerate(t.principals.applications):
        group = app.consumer_group
        if group is None:
            continue
        path = f"principals.applications[{i}].consumer_group"
        if not group or len(group) > _MAX_GROUP_NAME:
            yield Violation(
                path,
                f"is {len(group)} characters long; a consumer group name has 1-{_MAX_GROUP_NAME}",
                f"use a name of 1-{_MAX_GROUP_NAME} characters, or remove consumer_group",
            )
        elif not group.isprintable():
            yield Violation(
                path,
                "holds a control, non-printable or unpaired surrogate character "
                "(it is written into client .properties files)",
                "use printable characters only",
            )
        elif group == "*":
            yield Violation(
                path,
                "is '*', which an ACL reads as every consumer group",
                "name the application's own group",
            )
        elif group.startswith(_GROUP_FILTER_PREFIXES):
            prefix = next(x for x in _GROUP_FILTER_PREFIXES if group.startswith(x))
            yield Violation(
                path,
                f"{group!r} starts with {prefix!r}, which MirrorMaker 2's default groups.exclude skips: "
                "its offsets would never reach the passive cluster",
                f"use a group name that does not start with {', '.join(repr(x) for x in _GROUP_FILTER_PREFIXES)}",
            )


def _link_names(t: Topology) -> Iterator[Violation]:
    for j, link in enumerate(t.links):
        if not _LINK_NAME.fullmatch(link.name):
            yield Violation(
                f"links[{j}].name",
                f"{link.name!r} is not a valid link name (it names Pulumi resources and Kafka Connect connectors)",
                "use 1-128 characters from [A-Za-z0-9._-]",
            )


def _cluster_names(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if not _CLUSTER_NAME.fullmatch(c.name):
            yield Violation(
                f"clusters[{i}].name",
                f"{c.name!r} is not a valid cluster name (it names replication aliases, links and state directories)",
                "use 1-64 letters, digits, '-' or '_'",
            )


def _reserved_topic(name: str) -> str | None:
    """Why Kafka, MirrorMaker 2 or Connect keeps ``name`` for itself (:mod:`dr.kafka.internal_topics`, the
    definition grants and the verification share), or why MirrorMaker 2 would never copy it; else None."""
    why = why_internal(name)
    if why is not None:
        return why
    if name.endswith(".replica"):
        return "ends with '.replica', which MirrorMaker 2's default topics.exclude skips: it would never be replicated"
    return None


def _topic_names(t: Topology) -> Iterator[Violation]:
    normalised: dict[str, int] = {}
    for i, topic in enumerate(t.topics):
        if not _TOPIC_NAME.fullmatch(topic.name) or topic.name in (".", ".."):
            yield Violation(
                f"topics[{i}].name",
                f"{topic.name!r} is not a valid Kafka topic name",
                "use 1-249 characters from [a-zA-Z0-9._-], and not '.' or '..'",
            )
            continue
        why = _reserved_topic(topic.name)
        if why is not None:
            yield Violation(f"topics[{i}].name", f"{topic.name!r} {why}", "choose another topic name")
        key = topic.name.replace(".", "_")
        first = normalised.setdefault(key, i)
        if first != i and t.topics[first].name != topic.name:  # exact duplicates: _duplicate_names
            yield Violation(
                f"topics[{i}].name",
                f"{topic.name!r} collides with {t.topics[first].name!r} (topics[{first}]): Kafka refuses topics "
                "whose names differ only in '.' versus '_' (both map to the same metric names)",
                "rename one of them",
            )


def _topic_sizes(t: Topology) -> Iterator[Violation]:
    for i, topic in enumerate(t.topics):
        if topic.partitions > _MAX_PARTITIONS:
            yield Violation(
                f"topics[{i}].partitions",
                f"{topic.partitions} is more than {_MAX_PARTITIONS} (Kafka allows 2^31-1 per topic, but a KRaft "
                "cluster is sized for a few hundred thousand partitions in all)",
                f"use 1-{_MAX_PARTITIONS} partitions",
            )
        if topic.replication_factor > _MAX_REPLICATION_FACTOR:
            yield Violation(
                f"topics[{i}].replication_factor",
                f"{topic.replication_factor} does not fit Kafka's 16-bit replication factor",
                f"use at most {_MAX_REPLICATION_FACTOR} (and no more than the brokers of each cluster)",
            )
    holders = [c for c in t.clusters if c.is_local and c.role in (Role.ACTIVE, Role.PASSIVE, Role.STANDBY)]
    for c in holders:
        total = sum(
            min(topic.partitions, _MAX_PARTITIONS) * min(topic.replication_factor, c.brokers) for topic in t.topics
        )
        per_broker = math.ceil(total / c.brokers)
        if per_broker > _MAX_LOCAL_REPLICAS_PER_BROKER:
            index = t.clusters.index(c)
            yield Violation(
                f"clusters[{index}]",
                f"local cluster {c.name!r} would hold {per_broker} partition replicas per broker; one machine "
                f"runs at most {_MAX_LOCAL_REPLICAS_PER_BROKER} per broker (each keeps memory-mapped index files; "
                "vm.max_map_count defaults to 65530)",
                "declare fewer partitions under kafka-dr:topics, or run the cluster elsewhere (kind: external)",
            )


def _short(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...")


def _num(bound: float | None) -> str:
    return str(int(bound)) if bound is not None and float(bound).is_integer() else str(bound)


def _config_value_problem(key: str, value: str) -> tuple[str, str] | None:
    """(problem, fix) when Kafka would refuse ``value`` for topic config ``key``, else None."""
    kind, low, high = _TOPIC_CONFIGS[key]
    text = value.strip()  # Kafka trims every value before parsing it
    if kind in (_INT, _LONG):
        lowest, highest = _INT_RANGE if kind == _INT else _LONG_RANGE
        if not _WHOLE.fullmatch(text) or not lowest <= int(text) <= highest:
            return (
                f"{_short(value)} is not a {'32' if kind == _INT else '64'}-bit whole number",
                "use a whole number (no unit, no decimal point)",
            )
        number = int(text)
        if key == "compression.gzip.level" and number == -1:
            return None
        if (low is not None and number < low) or (high is not None and number > high):
            span = f"between {_num(low)} and {_num(high)}" if high is not None else f"at least {_num(low)}"
            extra = " (or -1)" if key == "compression.gzip.level" else ""
            return f"{number} is out of range: Kafka requires {span}{extra}", f"use a value {span}{extra}"
        return None
    if kind == _DOUBLE:
        if (
            not _DECIMAL.fullmatch(text)
            or not math.isfinite(float(text))
            or (low is not None and float(text) < low)
            or (high is not None and float(text) > high)
        ):
            return (
                f"{_short(value)} is not a number between {_num(low)} and {_num(high)}",
                f"use a decimal number between {_num(low)} and {_num(high)}, e.g. 0.5",
            )
        return None
    if kind == _BOOLEAN:
        if text.lower() not in ("true", "false"):
            return f"{_short(value)} is not a boolean", "use true or false"
        return None
    if kind == _REPLICAS:
        entries = [part.strip() for part in text.split(",")] if text else []
        if text == "*" or all(_REPLICA.fullmatch(entry) for entry in entries):
            return None
        return (
            f"{_short(value)} is not a list of replicas",
            "use '*' or partitionId:brokerId pairs, comma-separated (e.g. 0:1,1:2)",
        )
    choices = _CHOICES[key]
    if key == "cleanup.policy":
        parts = [part.strip() for part in text.split(",")]
        if ",".join(parts) in choices:
            return None
    elif value in choices:
        return None
    return (
        f"{_short(value)} is not one of {', '.join(repr(c) for c in choices)}",
        "use one of the values named (case matters)",
    )


def _topic_configs(t: Topology) -> Iterator[Violation]:
    local_holders = [c.name for c in t.clusters if c.is_local and c.role in (Role.ACTIVE, Role.PASSIVE, Role.STANDBY)]
    for i, topic in enumerate(t.topics):
        for key, value in topic.configs.items():
            path = f'topics[{i}].configs["{key}"]'
            if key in _RULE_OWNED_CONFIGS:
                continue  # _topic_durability: the topic has a field for it
            if key in _REMOVED_CONFIGS:
                problem, fix = _REMOVED_CONFIGS[key]
                yield Violation(path, problem, fix)
            elif key not in _TOPIC_CONFIGS:
                close = difflib.get_close_matches(key, list(_TOPIC_CONFIGS), n=1, cutoff=0.6)
                fix = (
                    f"did you mean {close[0]!r}?"
                    if close
                    else "use a Kafka 4 topic config: " + ", ".join(sorted(_TOPIC_CONFIGS))
                )
                yield Violation(path, f"{_short(key)} is not a Kafka topic config", fix)
            else:
                found = _config_value_problem(key, value)
                if found is not None:
                    yield Violation(path, *found)
        configs = topic.configs
        try:
            lag_min = int(configs.get("min.compaction.lag.ms", "0").strip())
            lag_max = int(configs.get("max.compaction.lag.ms", str(2**63 - 1)).strip())
        except ValueError:
            pass  # reported above
        else:
            if lag_min > lag_max:
                yield Violation(
                    f'topics[{i}].configs["min.compaction.lag.ms"]',
                    f"{lag_min} is more than max.compaction.lag.ms {lag_max}; Kafka refuses the pair",
                    "make min.compaction.lag.ms at most max.compaction.lag.ms",
                )
        if configs.get("remote.storage.enable", "").strip().lower() == "true" and local_holders:
            yield Violation(
                f'topics[{i}].configs["remote.storage.enable"]',
                f"is true but local cluster(s) {', '.join(repr(n) for n in local_holders)} hold the topic "
                "and run without tiered storage (remote.log.storage.system.enable), so Kafka refuses it",
                "remove it, or hold the topic only on external clusters with tiered storage",
            )


# -- roles ------------------------------------------------------------------------------------


def _some_active(t: Topology) -> Iterator[Violation]:
    """Some cluster is declared, and one at least is active (how many, the architecture's rules say)."""
    if not t.clusters:
        yield Violation(
            "clusters", "no cluster is declared", "declare at least the active cluster under kafka-dr:clusters"
        )
        return
    actives = [(i, c) for i, c in enumerate(t.clusters) if c.role == Role.ACTIVE]
    if not actives:
        yield Violation(
            "clusters",
            "no cluster has role active",
            "set role: active on the cluster the applications write to",
        )


def _passive_fed(t: Topology) -> Iterator[Violation]:
    actives = [c.name for c in t.clusters if c.role == Role.ACTIVE]
    source = repr(actives[0]) if actives else "the active cluster"
    for i, c in enumerate(t.clusters):
        if c.role == Role.PASSIVE and not any(link.target == c.name and link.is_running for link in t.links):
            yield Violation(
                f"clusters[{i}].role",
                f"passive cluster {c.name!r} has no incoming link, so nothing replicates into it",
                f"add a link with target {c.name!r} from {source}, or make the cluster standby",
            )


def _standby_unlinked(t: Topology) -> Iterator[Violation]:
    if t.failover_done:
        return
    standbys = {c.name for c in t.clusters if c.role == Role.STANDBY}
    for j, link in enumerate(t.links):
        if not link.is_running:
            continue
        for end, direction, name in _ends(link):
            if name in standbys:
                yield Violation(
                    f"links[{j}].{end}",
                    f"link {link.name!r} replicates {direction} standby cluster {name!r}, "
                    "but a standby has no link before a failover",
                    "remove the link: the failover pipeline links the standby when it promotes the passive cluster",
                )


# -- links ------------------------------------------------------------------------------------


def _ends(link: Link) -> tuple[tuple[str, str, str], ...]:
    """``(field, direction, cluster name)`` of the link's source and target, for messages."""
    return ("source", "out of", link.source), ("target", "into", link.target)


def _link_ends(t: Topology) -> Iterator[Violation]:
    by_name = {c.name: c for c in t.clusters}
    for j, link in enumerate(t.links):
        for end, direction, name in _ends(link):
            cluster = by_name.get(name)
            if cluster is None:
                yield Violation(
                    f"links[{j}].{end}",
                    f"link {link.name!r} names unknown cluster {name!r}",
                    f"use one of the declared clusters: {_names(t.clusters)}",
                )
            elif cluster.role == Role.DECOMMISSIONED and link.is_running:
                yield Violation(
                    f"links[{j}].{end}",
                    f"link {link.name!r} replicates {direction} decommissioned cluster {name!r}",
                    f"remove the link, or set its {end} to a cluster that is not decommissioned",
                )
        target = by_name.get(link.target)
        if link.engine == Engine.CLUSTER_LINK and target is not None and target.kind != Kind.CONFLUENT_CLOUD:
            yield Violation(
                f"links[{j}].engine",
                f"cluster-link needs a Confluent destination, but target {target.name!r} is {target.kind}",
                "use engine: mirrormaker2",
            )
        source = by_name.get(link.source)
        if link.engine == Engine.CLUSTER_LINK and source is not None and source.kind != Kind.CONFLUENT_CLOUD:
            yield Violation(
                f"links[{j}].source",
                f"cluster-link is built between Confluent Cloud clusters, but source {source.name!r} is {source.kind}",
                "use engine: mirrormaker2",
            )
        if not link.is_running:
            if link.engine != Engine.CLUSTER_LINK:
                yield Violation(
                    f"links[{j}].state",
                    f"is {link.state} on {link.engine} link {link.name!r}; "
                    "only a cluster-link is kept after a failover",
                    "remove the link, or set state: running",
                )
            elif target is not None and target.role != Role.ACTIVE:
                yield Violation(
                    f"links[{j}].state",
                    f"is {link.state} but target {target.name!r} of link {link.name!r} is {target.role}: "
                    "promoted mirror topics belong on the active cluster",
                    "set state: running if the link should replicate, or remove the link",
                )


def _pattern_problem(pattern: str) -> tuple[str, str] | None:
    """(problem, fix) when ``pattern`` cannot be written into MirrorMaker 2's settings or Python's
    ``re`` refuses it (the product matches declared names with it); Java's reading is checked after."""
    if not pattern:
        return "is empty, so it selects nothing", "remove it, or write a name or a regular expression"
    if not pattern.isprintable():
        return (
            "holds a control, non-printable or unpaired surrogate character "
            "(the pattern is written into MirrorMaker 2 properties files)"
        ), "use printable characters only"
    if "," in pattern:
        return (
            "holds ',', which MirrorMaker 2 reads as a separator between patterns "
            "(its topics/groups settings are comma-separated lists)",
            "use one list entry per pattern instead of a comma (a repetition {m,n} cannot be written here)",
        )
    if "(?P" in pattern:
        return (
            "uses Python-only named-group syntax (?P...), which Java's regular expressions (MirrorMaker 2) refuse"
        ), "use (?<name>...) or a plain group (...)"
    try:
        _python_regex(pattern)
    except re.error as exc:
        return (
            f"{_short(pattern)} is not a valid regular expression ({exc})",
            "fix the pattern; names are matched as full regular expressions",
        )
    except RecursionError:
        return "is nested too deeply to compile", "simplify the pattern"
    slow = backtracking_problem(pattern)
    if slow is not None:
        return (
            f"{pattern!r} can take exponential time to match a name (catastrophic backtracking in a "
            f"backtracking engine: Python's re, java.util.regex that MirrorMaker 2 runs): {slow}",
            "rewrite it so no repeated part can match the same text two ways — e.g. (a+)+b → a+b, "
            "(\\w+\\s?)* → [\\w\\s]*, (a|a)* → a* — or list the names one by one",
        )
    return None


def _python_regex(pattern: str) -> re.Pattern[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "possible nested set" and friends: Java's reading is checked
        return re.compile(pattern)


_BACK_REFERENCE = re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]")
_PATTERN_FIELDS = {"topics": "topic", "consumer_groups": "consumer group"}
_PORTABLE_FIX = (
    "write it in the syntax both share (no POSIX classes like [[:alpha:]], no class intersections "
    "like [a-z&&[^e]], no \\Q..\\E, \\p{..}, \\h or (?#..)), or list the names one by one"
)


def _probes(pattern: str, names: list[str]) -> list[str]:
    """Strings on which Java's and Python's readings of ``pattern`` are compared: the names the
    product asks about (declared topics or groups), every printable ASCII character, and strings
    built from the pattern's own characters (where dialects differ, e.g. ``[[:alpha:]]``)."""
    probes = list(names) + [chr(c) for c in range(0x20, 0x7F)]
    probes += [pattern, f"{pattern}]"] + [c + c for c in dict.fromkeys(pattern)]
    probes += [f"{c}]" for c in dict.fromkeys(pattern)] + [f"{n}-x" for n in names] + [f"x.{n}" for n in names]
    return list(dict.fromkeys(p for p in probes if p.isprintable()))


def _meaning_problem(pattern: str, matches: dict[str, bool]) -> tuple[str, str] | None:
    compiled = name_matcher(pattern)
    for probe, java in matches.items():
        if java != compiled.fullmatch(probe):
            engine, other = ("Java", "Python") if java else ("Python", "Java")
            return (
                f"{_short(pattern)} means different things to Java's regular expressions (MirrorMaker 2 runs "
                f"it) and Python's (drctl reads it): {engine} matches {probe!r}, {other} does not",
                _PORTABLE_FIX,
            )
    return None


def _link_patterns(t: Topology) -> Iterator[Violation]:
    """Each pattern valid for both engines with one meaning, and each link's list, joined into the
    alternation MirrorMaker 2 compiles, selecting exactly what the patterns do one by one."""
    declared = {
        "topics": [topic.name for topic in t.topics],
        "consumer_groups": [app.consumer_group for app in t.principals.applications if app.consumer_group],
    }
    for_java: list[tuple[str, str, str, list[str]]] = []  # (path, pattern, field, probes)
    for j, link in enumerate(t.links):
        for field in _PATTERN_FIELDS:
            patterns: list[str] = getattr(link, field)
            fine = True
            for k, pattern in enumerate(patterns):
                found = _pattern_problem(pattern)
                if found is not None:
                    fine = False
                    yield Violation(f"links[{j}].{field}[{k}]", *found)
                elif not same_in_both(pattern):
                    for_java.append((f"links[{j}].{field}[{k}]", pattern, field, _probes(pattern, declared[field])))
            if fine and len(patterns) > 1:
                for k, pattern in enumerate(patterns):
                    if _BACK_REFERENCE.search(pattern):
                        fine = False
                        yield Violation(
                            f"links[{j}].{field}[{k}]",
                            f"{_short(pattern)} holds a numbered back-reference; MirrorMaker 2 joins the list "
                            "into one expression, where the group numbers of later patterns shift",
                            "drop the back-reference, or make this the link's only pattern",
                        )
            if fine and len(patterns) > 1 and not all(same_in_both(p) for p in patterns):
                joined = "|".join(f"(?:{p})" for p in patterns)
                for_java.append((f"links[{j}].{field}", joined, field, _probes(joined, declared[field])))
    if not for_java:
        return
    probes = [p for _, _, _, ps in for_java for p in ps]
    verdicts = java_verdicts((pattern for _, pattern, _, _ in for_java), probes)
    refused: set[str] = set()
    for path, pattern, field, wanted in for_java:
        verdict = verdicts[pattern]
        if path.endswith("]"):
            if verdict.error is not None:
                refused.add(path.rsplit("[", 1)[0])
                yield Violation(
                    path,
                    f"{_short(pattern)} is refused by Java's regular expressions, which MirrorMaker 2 compiles it "
                    f"with ({verdict.error})",
                    _PORTABLE_FIX,
                )
                continue
            found = _meaning_problem(pattern, {p: verdict.matches[p] for p in wanted})
            if found is not None:
                refused.add(path.rsplit("[", 1)[0])
                yield Violation(path, *found)
        elif path not in refused:
            yield from _joined_problem(t, path, field, pattern, verdict, wanted)


def _joined_problem(
    t: Topology, path: str, field: str, joined: str, verdict: JavaVerdict, probes: list[str]
) -> Iterator[Violation]:
    j = int(path.split("[", 1)[1].split("]", 1)[0])
    patterns: list[str] = getattr(t.links[j], field)
    compiled = [name_matcher(p) for p in patterns]
    for probe in probes:
        one_by_one = any(c.fullmatch(probe) for c in compiled)
        java = verdict.error is None and verdict.matches[probe]
        if java != one_by_one:
            yield Violation(
                path,
                f"joined as MirrorMaker 2 joins them ({_short(joined)}), the {_PATTERN_FIELDS[field]} patterns "
                f"{'match' if java else 'do not match'} {probe!r}, which one by one they "
                f"{'do not' if java else 'do'} (a back-reference or group number crosses patterns)",
                "make each pattern stand alone: no back-references (\\1) or numbered groups",
            )
            return


# -- topics and applications ------------------------------------------------------------------


def _topic_durability(t: Topology) -> Iterator[Violation]:
    holders = [c for c in t.clusters if c.is_local and c.role in (Role.ACTIVE, Role.PASSIVE, Role.STANDBY)]
    production = t.profile == Profile.PRODUCTION
    for i, topic in enumerate(t.topics):
        rf, isr = topic.replication_factor, topic.min_insync_replicas
        for c in holders:
            if rf > c.brokers:
                holds = "will hold every topic after a failover" if c.role == Role.STANDBY else "holds every topic"
                grow = f", or give cluster {c.name!r} brokers: 3" if c.brokers < 3 and rf <= 3 else ""
                yield Violation(
                    f"topics[{i}].replication_factor",
                    f"{rf} is more than the {c.brokers} broker(s) of local {c.role} cluster {c.name!r}, which {holds}",
                    f"set replication_factor to at most {c.brokers}{grow}",
                )
        if isr > rf:
            yield Violation(
                f"topics[{i}].min_insync_replicas",
                f"{isr} is more than replication_factor {rf}, so no acks=all write could ever succeed",
                f"set min_insync_replicas to at most {rf}",
            )
        if production and rf >= 3 and isr < 2:
            yield Violation(
                f"topics[{i}].min_insync_replicas",
                f"is {isr} with replication_factor {rf} in the production profile: "
                "an acknowledged write may exist on a single broker",
                "set min_insync_replicas to 2",
            )
        unclean = topic.configs.get("unclean.leader.election.enable", "")
        if production and unclean.strip().lower() == "true":
            yield Violation(
                f'topics[{i}].configs["unclean.leader.election.enable"]',
                "is true in the production profile: "
                "an out-of-sync replica may become leader and drop acknowledged messages",
                'remove it or set it to "false"',
            )
        for key, field in _RULE_OWNED_CONFIGS.items():
            if key in topic.configs:
                yield Violation(
                    f'topics[{i}].configs["{key}"]',
                    f"duplicates the topic's {field} field",
                    f"remove it from configs and set {field} instead",
                )


def _application_topics(t: Topology) -> Iterator[Violation]:
    declared = {topic.name for topic in [*t.topics, *remote_copies(t)]}
    known = ", ".join(repr(topic.name) for topic in t.topics) or "none declared"
    for i, app in enumerate(t.principals.applications):
        for field, verb in (("produces", "produces to"), ("consumes", "consumes from")):
            for k, name in enumerate(getattr(app, field)):
                if name not in declared and not consumes_remote(t, name):
                    yield Violation(
                        f"principals.applications[{i}].{field}[{k}]",
                        f"application {app.name!r} {verb} undeclared topic {name!r}",
                        f"declare {name!r} under kafka-dr:topics, or use one of: {known}",
                    )
        for field, verb in (("produces_prefix", "produces to"), ("consumes_prefix", "consumes from")):
            prefix = getattr(app, field)
            if prefix is not None and not any(name.startswith(prefix) for name in declared):
                yield Violation(
                    f"principals.applications[{i}].{field}",
                    f"application {app.name!r} {verb} prefix {prefix!r}, which no declared topic starts with",
                    f"declare a topic named {prefix}<something> under kafka-dr:topics, or fix the prefix",
                )
    yield from _prefix_reach(t)


def _writes_on(t: Topology, app: Application) -> str | None:
    """Where ``app`` writes: its home in an active-active or hub-and-spoke estate (unset: the hub), else the
    active cluster (None). Applications writing on different clusters never write the same topic."""
    return app.home if ARCHITECTURES[t.architecture].writes_at_home else None


def _prefix_reach(t: Topology) -> Iterator[Violation]:
    """A prefixed grant reaches every topic whose name starts with its prefix, on every cluster the
    application is granted on: no prefix may reach an internal topic (the replicator's configuration, the
    consumer offsets, a Connect cluster's configs), nor a write prefix another application's topics."""
    internal = t.internal_topics()
    apps = t.principals.applications
    for i, app in enumerate(apps):
        for field, verb in (("produces_prefix", "write"), ("consumes_prefix", "read")):
            prefix = getattr(app, field)
            if prefix is None:
                continue
            reached = internal.reached_by(prefix)
            if reached:
                yield Violation(
                    f"principals.applications[{i}].{field}",
                    f"{prefix!r} would let application {app.name!r} {verb} internal topics {', '.join(reached)}",
                    "use a longer prefix that only the application's own topics start with (e.g. "
                    f"'{app.name}.'), or name its topics in {field.removesuffix('_prefix')}",
                )
        prefix = app.produces_prefix
        if prefix is None:
            continue
        for k, other in enumerate(apps):
            if k == i or _writes_on(t, other) != _writes_on(t, app):
                continue
            taken = [n for n in t.produced_by(other) if n.startswith(prefix) and n not in app.produces]
            if taken:
                yield Violation(
                    f"principals.applications[{i}].produces_prefix",
                    f"{prefix!r} would let application {app.name!r} write {', '.join(map(repr, taken))}, "
                    f"produced by application {other.name!r} (principals.applications[{k}])",
                    "use a prefix only the application's own topics start with, or name a topic both write "
                    "in the produces of each (a shared topic is declared by name)",
                )


# -- clusters ---------------------------------------------------------------------------------


def _free_base_port(t: Topology) -> int:
    ends = [c.port_window.stop for c in t.clusters if c.port_window is not None]
    if not ends:
        return _DEFAULT_BASE_PORT
    return -(-max(ends) // PORT_WINDOW) * PORT_WINDOW


def _local_clusters(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if not c.is_local:
            continue
        if c.base_port is None:
            yield Violation(
                f"clusters[{i}].base_port",
                f"local cluster {c.name!r} has no base_port",
                f"set base_port to the first of {PORT_WINDOW} free ports, e.g. {_free_base_port(t)}",
            )
        elif c.base_port < _FIRST_PORT or c.base_port + PORT_WINDOW - 1 > _LAST_PORT:
            yield Violation(
                f"clusters[{i}].base_port",
                f"window {c.base_port}..{c.base_port + PORT_WINDOW - 1} of local cluster {c.name!r} "
                f"leaves the range {_FIRST_PORT}..{_LAST_PORT} (from 32768 on, Linux hands ports to client sockets)",
                f"choose a base_port between {_FIRST_PORT} and {_LAST_PORT - PORT_WINDOW + 1}",
            )
        for r, rack in enumerate(c.racks):
            if not _RACK.fullmatch(rack):
                yield Violation(
                    f"clusters[{i}].racks[{r}]",
                    f"{_short(rack)} is not a valid rack name (it is written into the broker's server.properties)",
                    "use 1-64 characters from [A-Za-z0-9._-]",
                )
        if len(c.racks) != c.brokers:
            default = ", ".join(f"rack-{n}" for n in range(1, c.brokers + 1))
            yield Violation(
                f"clusters[{i}].racks",
                f"{len(c.racks)} rack(s) for the {c.brokers} broker(s) of local cluster {c.name!r}",
                f"list exactly one rack per broker, e.g. [{default}]",
            )
        if c.bootstrap_servers is not None:
            yield Violation(
                f"clusters[{i}].bootstrap_servers",
                f"is set on local cluster {c.name!r}, whose listeners come from base_port",
                "remove it, or set kind: external",
            )
        if c.admin_password is not None:
            yield Violation(
                f"clusters[{i}].admin_password",
                f"is set on local cluster {c.name!r}; "
                "local passwords are generated at runtime into the state directory",
                "remove it",
            )


def _port_overlaps(t: Topology) -> Iterator[Violation]:
    windows = [(i, c, c.port_window) for i, c in enumerate(t.clusters) if c.port_window is not None]
    for n, (j, c, window) in enumerate(windows):
        for _, other, other_window in windows[:n]:
            if window.start < other_window.stop and other_window.start < window.stop:
                yield Violation(
                    f"clusters[{j}].base_port",
                    f"window {window.start}..{window.stop - 1} of local cluster {c.name!r} overlaps "
                    f"{other_window.start}..{other_window.stop - 1} of {other.name!r}",
                    f"give each local cluster its own {PORT_WINDOW}-port window, e.g. base_port {_free_base_port(t)}",
                )
                break


def _remote_clusters(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if c.is_local:
            continue
        servers = (c.bootstrap_servers or "").strip()
        if not servers and c.kind == Kind.CONFLUENT_CLOUD and c.bootstrap_servers is None:
            pass  # the program creates the cluster and exports its bootstrap endpoint
        elif not servers:
            yield Violation(
                f"clusters[{i}].bootstrap_servers",
                f"{c.kind} cluster {c.name!r} has no bootstrap_servers",
                "set it to the brokers' host:port, comma-separated",
            )
        else:
            for entry in (part.strip() for part in servers.split(",")):
                if not _HOST_PORT.fullmatch(entry):
                    yield Violation(
                        f"clusters[{i}].bootstrap_servers",
                        f"{entry!r} of cluster {c.name!r} is not host:port",
                        "list the brokers as host:port, comma-separated",
                    )
                elif not 1 <= int(entry.rsplit(":", 1)[1]) <= _MAX_PORT:
                    yield Violation(
                        f"clusters[{i}].bootstrap_servers",
                        f"port {entry.rsplit(':', 1)[1]} of {entry!r} (cluster {c.name!r}) is outside 1..{_MAX_PORT}",
                        "use the brokers' real port (1-65535)",
                    )
        if c.base_port is not None:
            yield Violation(
                f"clusters[{i}].base_port",
                f"is set on {c.kind} cluster {c.name!r}; only local clusters use a port window",
                "remove it, or set kind: local",
            )


def _confluent_clusters(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if c.kind == Kind.CONFLUENT_CLOUD and c.confluent is None:
            yield Violation(
                f"clusters[{i}].confluent",
                f"confluent-cloud cluster {c.name!r} has no confluent settings, so it cannot be created",
                "add confluent: {environment_id, cloud, region, cluster_type} (an API key is created by the "
                "program; to use your own add api_key, and api_secret with `pulumi config set --path --secret`)",
            )
        elif c.kind != Kind.CONFLUENT_CLOUD and c.confluent is not None:
            yield Violation(
                f"clusters[{i}].confluent",
                f"is set on {c.kind} cluster {c.name!r}; only confluent-cloud clusters use it",
                "remove it, or set kind: confluent-cloud",
            )


def _quotas_where_kafka_sets_them(t: Topology) -> Iterator[Violation]:
    """Client quotas reach a cluster through Kafka's AlterClientQuotas, which Confluent Cloud does not
    serve to a cluster's API key: a declared quota would fail ``pulumi up`` there, so it is refused here."""
    declared = [f"principals.applications[{i}].quota" for i, a in enumerate(t.principals.applications) if a.quota]
    if t.principals.default_quota is not None:
        declared.append("principals.default_quota")
    if not declared:
        return
    for i, c in enumerate(t.clusters):
        if c.kind == Kind.CONFLUENT_CLOUD:
            yield Violation(
                declared[0],
                f"client quotas are declared, but confluent-cloud cluster {c.name!r} (clusters[{i}]) does not take "
                "quotas through the Kafka API the program uses",
                "remove the quotas from the stack file and set them with Confluent Cloud's own Client Quotas",
            )


def _batched_provisioning(t: Topology) -> Iterator[Violation]:
    if t.provisioning != "batched":
        return
    for i, c in enumerate(t.clusters):
        if c.kind == Kind.CONFLUENT_CLOUD:
            yield Violation(
                f"clusters[{i}].kind",
                f"confluent-cloud cluster {c.name!r} cannot be provisioned batched (its topics and ACLs go "
                "through Confluent's API keys, not an admin login this program holds)",
                "remove `kafka-dr:provisioning: batched` (individual resources work on every kind), or "
                "keep batched for stacks of local and external clusters only",
            )


def _cluster_link_destinations(t: Topology) -> Iterator[Violation]:
    index = {c.name: i for i, c in enumerate(t.clusters)}
    # name -> why it must be dedicated; a standby becomes a destination when the passive is promoted
    destinations: dict[str, str] = {}
    for link in t.links:
        if link.engine == Engine.CLUSTER_LINK:
            destinations.setdefault(link.target, f"is the destination of cluster link {link.name!r}")
    passives = [c.name for c in t.clusters if c.role == Role.PASSIVE]
    fed_by_cluster_link = any(
        link.engine == Engine.CLUSTER_LINK and link.is_running and link.target in passives for link in t.links
    )
    if fed_by_cluster_link:
        for c in t.clusters:
            if c.role == Role.STANDBY:
                destinations.setdefault(c.name, "will be the destination of a cluster link after a failover")
    for name, why in destinations.items():
        if name not in index:
            continue  # _link_ends reports unknown clusters
        i = index[name]
        settings = t.clusters[i].confluent
        if settings is not None and settings.cluster_type != "dedicated":
            yield Violation(
                f"clusters[{i}].confluent.cluster_type",
                f"is {settings.cluster_type} but cluster {name!r} {why}; "
                "Confluent Cloud accepts cluster links only into dedicated clusters",
                "set confluent.cluster_type: dedicated",
            )


_CONNECT_URL = re.compile(r"https?://(?:[A-Za-z0-9.-]+|\[[0-9a-fA-F:.]+\])(?::\d{1,5})?(?:/[A-Za-z0-9._~/-]*)?")
"""An http(s) URL without credentials, query or fragment: passwords go in ``password`` (a secret)."""
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)


def _connect_url_problem(url: str) -> str | None:
    """What is wrong with a Connect REST URL (scheme, host, port range, form), or None."""
    shown = _short(url)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("http", "https"):
        return f"{shown} is not an http(s) URL of a Connect REST API (scheme {scheme or 'missing'})"
    if not _CONNECT_URL.fullmatch(url):
        return f"{shown} is not an http(s) URL of the form http(s)://host[:port][/path] (no query, fragment or spaces)"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # urlsplit checks a bracketed host itself
        return f"{shown} has no valid IPv6 address"
    host = parts.hostname or ""
    if not host.startswith("[") and ":" not in host and not _HOST_NAME.fullmatch(host):
        return f"{shown} has no valid host name ({host!r})"
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"{shown} has no valid IPv6 address ({host!r})"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= _MAX_PORT:
        raw = parts.netloc.rsplit(":", 1)[1]
        return f"port {raw} of {shown} is outside 1..{_MAX_PORT}"
    return None


def _connect_clusters(t: Topology) -> Iterator[Violation]:
    seen: set[str] = set()
    windows = [c.port_window for c in t.clusters if c.port_window is not None]
    taken: list[tuple[str, range]] = []
    for i, cc in enumerate(t.connect_clusters):
        where = f"connect_clusters[{i}]"
        if not _CLUSTER_NAME.fullmatch(cc.name):
            yield Violation(
                f"{where}.name",
                f"{_short(cc.name)} is not a valid Connect cluster name "
                "(it names the Connect group, its internal topics and a directory)",
                "use 1-64 characters from [A-Za-z0-9_-]",
            )
        elif cc.name in seen:
            yield Violation(f"{where}.name", f"Connect cluster {cc.name!r} is declared twice", "rename or remove one")
        seen.add(cc.name)
        home = next((c for c in t.clusters if c.name == cc.cluster), None)
        if home is None:
            yield Violation(
                f"{where}.cluster",
                f"names no declared cluster ({_short(cc.cluster)})",
                f"use one of: {_names(t.clusters)}",
            )
        if cc.is_local:
            if home is not None and not home.is_local:
                yield Violation(
                    f"{where}.cluster",
                    f"local Connect cluster {cc.name!r} keeps its internal topics on {home.kind} cluster {home.name!r}",
                    "home a local Connect cluster on a local cluster, or set url for an existing one",
                )
            elif home is not None and home.role not in (Role.ACTIVE, Role.PASSIVE):
                yield Violation(
                    f"{where}.cluster",
                    f"Connect cluster {cc.name!r} lives on {home.role} cluster {home.name!r}, which runs no brokers",
                    "home it on the passive cluster (the target of its links)",
                )
            if cc.base_port is None:
                yield Violation(
                    f"{where}.base_port",
                    f"local Connect cluster {cc.name!r} has no base_port",
                    f"set base_port to the first of {cc.workers} free ports (its workers' REST ports)",
                )
            elif cc.base_port < _FIRST_PORT or cc.base_port + cc.workers - 1 > _LAST_PORT:
                yield Violation(
                    f"{where}.base_port",
                    f"REST ports {cc.base_port}..{cc.base_port + cc.workers - 1} "
                    f"leave the range {_FIRST_PORT}..{_LAST_PORT} (from 32768 on, Linux hands ports to client sockets)",
                    f"choose a base_port between {_FIRST_PORT} and {_LAST_PORT - cc.workers + 1}",
                )
            else:
                ports = cc.rest_ports or range(0)
                clash = [w for w in windows if ports.start < w.stop and w.start < ports.stop] + [
                    r for _, r in taken if ports.start < r.stop and r.start < ports.stop
                ]
                if clash:
                    yield Violation(
                        f"{where}.base_port",
                        f"REST ports {ports.start}..{ports.stop - 1} of Connect "
                        f"cluster {cc.name!r} overlap the ports of a local cluster or another Connect "
                        "cluster",
                        "choose a base_port outside every local cluster's window",
                    )
                taken.append((cc.name, ports))
            for field in ("username", "password"):
                if getattr(cc, field) is not None:
                    yield Violation(
                        f"{where}.{field}",
                        f"is set on local Connect cluster {cc.name!r}, whose REST "
                        "credentials are generated into the state directory",
                        "remove it",
                    )
        elif "@" in (cc.url or ""):  # never echo it: the part before '@' is a password
            yield Violation(
                f"{where}.url",
                "holds credentials (user:password@host)",
                "remove them from the url; set username and password (the password a secret)",
            )
        elif (url_problem := _connect_url_problem(cc.url or "")) is not None:
            yield Violation(f"{where}.url", url_problem, "use http(s)://host:port with a port of 1-65535")
        elif (cc.username is None) != (cc.password is None):
            yield Violation(
                f"{where}.password", "username and password of a Connect REST API go together", "set both or neither"
            )


def _connect_links(t: Topology) -> Iterator[Violation]:
    declared = {cc.name: cc for cc in t.connect_clusters}
    clusters = {c.name: c for c in t.clusters}
    for i, link in enumerate(t.links):
        if link.connect is None:
            continue
        where = f"links[{i}].connect"
        if link.engine != Engine.MIRRORMAKER2:
            yield Violation(
                where,
                f"link {link.name!r} is a {link.engine}; only MirrorMaker 2 runs on Kafka Connect",
                "remove connect, or use engine: mirrormaker2",
            )
            continue
        cc = declared.get(link.connect)
        if cc is None:
            known = ", ".join(declared) or "none declared"
            yield Violation(
                where,
                f"names no declared Connect cluster ({_short(link.connect)})",
                f"declare it under kafka-dr:connectClusters, or use one of: {known}",
            )
            continue
        ends = [clusters[n] for n in (link.source, link.target) if n in clusters]
        if cc.is_local and any(not c.is_local for c in ends):
            yield Violation(
                where,
                f"local Connect cluster {cc.name!r} runs links between local clusters only "
                f"(link {link.name!r} has an external end)",
                "use a Connect cluster with a url",
            )
        if not cc.is_local and any(c.is_local for c in ends):
            yield Violation(
                where,
                f"external Connect cluster {cc.name!r} cannot reach local cluster(s) of link "
                f"{link.name!r} (they listen on 127.0.0.1 of this machine)",
                "use a local Connect cluster (no url) for links between local clusters",
            )


def _link_delivery(t: Topology) -> Iterator[Violation]:
    """``delivery: exactly-once`` only where the link's runner can honour it: an external Connect cluster
    must declare that its workers enable exactly-once source support; a cluster link has no choice."""
    declared = {cc.name: cc for cc in t.connect_clusters}
    for i, link in enumerate(t.links):
        where = f"links[{i}].delivery"
        if link.delivery is None:
            continue
        if link.engine != Engine.MIRRORMAKER2:
            yield Violation(
                where,
                f"link {link.name!r} is a {link.engine}, which copies the log itself (exactly once)",
                "remove delivery",
            )
            continue
        cc = declared.get(link.connect or "")
        if link.delivery == Delivery.EXACTLY_ONCE and cc is not None and not cc.is_local and not cc.exactly_once_source:
            yield Violation(
                where,
                f"link {link.name!r} asks for exactly-once, but the workers of Connect cluster {cc.name!r} are not "
                "declared to run with exactly.once.source.support=enabled",
                f"set exactly.once.source.support=enabled on every worker of {cc.name!r} and declare "
                "exactly_once_source: true on it, or declare delivery: at-least-once on the link",
            )


def _oauth_only(t: Topology, connect: str) -> bool:
    """Every end of every link on Connect cluster ``connect`` is OAUTHBEARER: its workers log the replicator in
    with its client id and secret (``oauth.replicator``, required by :mod:`dr.topology.oauth_rules`), not
    with ``principals.replicator_password``."""
    ends = {end for link in t.links if link.connect == connect for end in (link.source, link.target)}
    return bool(ends) and all(c.sasl_mechanism == "OAUTHBEARER" for c in t.clusters if c.name in ends)


def _external_connect_credentials(t: Topology) -> Iterator[Violation]:
    """An external Connect cluster's workers must find the replicator's credentials through a
    declared config provider, and they hold the password the stack declares (nothing generated)."""
    used = {link.connect for link in t.links if link.connect is not None}
    for i, cc in enumerate(t.connect_clusters):
        if cc.is_local:
            if cc.replicator_credentials is not None:
                yield Violation(
                    f"connect_clusters[{i}].replicator_credentials",
                    f"is set on local Connect cluster {cc.name!r}, whose workers get a generated secrets file",
                    "remove it",
                )
            continue
        if cc.replicator_credentials is None:
            yield Violation(
                f"connect_clusters[{i}].replicator_credentials",
                f"external Connect cluster {cc.name!r} does not say how its workers find the replicator's credentials",
                "declare the config provider the platform team set up on every worker, e.g. "
                "`replicator_credentials: {provider: file, path: /etc/kafka-connect/secrets/replicator.properties}` "
                "(docs/production/index.md)",
            )
        if cc.name in used and t.principals.replicator_password is None and not _oauth_only(t, cc.name):
            yield Violation(
                "principals.replicator_password",
                f"links run on external Connect cluster {cc.name!r}, whose workers need the replicator's "
                "password before the first `pulumi up`",
                "set it as a secret (`pulumi config set --path --secret 'kafka-dr:principals.replicatorPassword' "
                "<password>`) and put the same password where the workers' config provider reads it",
            )


def _transport(t: Topology) -> Iterator[Violation]:
    for path, problem, fix in (*tls_problems(t), *oauth_problems(t)):
        yield Violation(path, problem, fix)


_RULES: tuple[Callable[[Topology], Iterator[Violation]], ...] = (
    _duplicate_names,
    _principals,
    _cluster_names,
    _link_names,
    _topic_names,
    _topic_sizes,
    _topic_configs,
    _consumer_groups,
    _some_active,
    _passive_fed,
    _standby_unlinked,
    _link_ends,
    _link_patterns,
    _topic_durability,
    _application_topics,
    _local_clusters,
    _port_overlaps,
    _remote_clusters,
    _transport,
    _confluent_clusters,
    _quotas_where_kafka_sets_them,
    _batched_provisioning,
    _cluster_link_destinations,
    _connect_clusters,
    _connect_links,
    _link_delivery,
    _external_connect_credentials,
)


def find_violations(topology: Topology) -> list[Violation]:
    """Every rule ``topology`` breaks, in a stable order (empty when valid): the shared rules, then its
    architecture's own (:data:`~dr.topology.architectures.ARCHITECTURES`), then the endpoint's and the
    failover policy's."""
    rules = (*_RULES, *ARCHITECTURES[topology.architecture].rules, _endpoint, _policy)
    return [violation for rule in rules for violation in rule(topology)]


def _endpoint(t: Topology) -> Iterator[Violation]:
    for path, problem, fix in endpoint_problems(t):
        yield Violation(path, problem, fix)


def _policy(t: Topology) -> Iterator[Violation]:
    for path, problem, fix in policy_violations(t.failover_policy, (c.name for c in t.clusters)):
        yield Violation(path, problem, fix)


def raise_for_violations(topology: Topology) -> None:
    """Raise one TopologyError listing every violation of ``topology``; return if there is none."""
    violations = find_violations(topology)
    if not violations:
        return
    count = len(violations)
    listing = "\n".join(f"  - {v}" for v in violations)
    raise TopologyError(
        f"topology of stack '{topology.name}' breaks {count} rule{'s' if count != 1 else ''}:\n{listing}",
        f"correct each field listed above under `kafka-dr:` in Pulumi.{topology.name}.yaml, then run again",
    )
