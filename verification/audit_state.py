"""The incremental audit's memory: one state file per link, and the pure matching of one increment.

A state file (``<state dir>/audit/<link>.json``, 0600, written atomically; with a ``postgres://`` backend a
row of the team database instead, :mod:`dr.failover.record.team_store`) holds

* ``stack``, ``link`` and both clusters' names and cluster ids — a file copied from another
  stack, or kept across a re-created cluster, is refused (:class:`ConfigError`, never a silent
  full re-verify reported as incremental);
* ``bounds``: per side, topic and partition, the end offset already read (the next audit reads
  ``[bound, new end)``);
* ``frontier``: per source partition, the highest source offset whose copy was seen on the
  target. MirrorMaker 2 copies a partition in order, so an unmatched source record *below* the
  frontier was skipped by the link (**missing**); one at or above it is **in flight**;
* ``max_ts``: per side, the latest record timestamp read by the audits (absent in files written
  before it existed: unknown). A failover's integrity check starts from the audit only when its
  cut-off is at or after both — then every audited pair would also be compared by the full
  verification (:mod:`verification.from_audit`);
* ``residue``: fingerprints ``[topic, partition, offset, ts, key_hash, checksum]`` of source
  records not yet matched (in flight or missing) and of target records not yet matched (copies
  that arrived before their source record was read, or records only on the target).

Matching is a multiset match on ``(topic, key_hash, checksum)``; equal fingerprints are paired in
offset order, so the earliest source record pairs with the earliest copy.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NamedTuple, NotRequired, Protocol, TypedDict, TypeVar

from dr.base.errors import ConfigError
from verification.link_ref import LinkRef

__all__ = [
    "STATE_VERSION",
    "AuditState",
    "AuditStore",
    "Fingerprint",
    "Increment",
    "StateIdentity",
    "load_state",
    "match_increment",
    "save_state",
    "split_by_frontier",
]

STATE_VERSION = 1

T = TypeVar("T")


class Fingerprint(NamedTuple):
    """One record, without its payload: where it is, when, which key and which content."""

    topic: str
    partition: int
    offset: int
    ts: int
    key_hash: int
    checksum: int


#: topic → partition → offset
Offsets = dict[str, dict[int, int]]

#: topic → partition (as text, JSON's keys) → offset: :data:`Offsets` in the state document
OffsetsDocument = dict[str, dict[str, int]]


class ClusterDocument(TypedDict):
    """One side of the link in the state document: the cluster's name and its Kafka cluster id."""

    cluster: str
    cluster_id: str


class Sides(TypedDict, Generic[T]):
    """Something of each side of the link."""

    source: T
    target: T


class StateDocument(TypedDict):
    """The state file's JSON (:meth:`AuditState.to_dict`; see the module docstring)."""

    version: int
    stack: str
    link: str
    source: ClusterDocument
    target: ClusterDocument
    runs: int
    verified_total: int
    created_ms: int
    updated_ms: int
    bounds: Sides[OffsetsDocument]
    frontier: OffsetsDocument
    max_ts: NotRequired[Sides[int]]
    residue: Sides[list[list[str | int]]]
    """Fingerprints ``[topic, partition, offset, ts, key_hash, checksum]``."""


@dataclass(kw_only=True)
class StateIdentity:
    """Whose state file it is (the first fields of :class:`AuditState`): the link and the ids of its two
    clusters, checked by :func:`load_state`, written into a new state."""

    ref: LinkRef
    """The stack, the link and its two clusters by name."""
    source_id: str
    target_id: str

    @property
    def stack(self) -> str:
        """The stack of the link."""
        return self.ref.stack

    @property
    def link(self) -> str:
        """The link's name."""
        return self.ref.link

    @property
    def source_cluster(self) -> str:
        """The link's source cluster, by name."""
        return self.ref.source

    @property
    def target_cluster(self) -> str:
        """The link's target cluster, by name."""
        return self.ref.target


@dataclass(kw_only=True)
class AuditState(StateIdentity):
    """What one link's audits have established so far (see the module docstring)."""

    source_bounds: Offsets = field(default_factory=dict)
    target_bounds: Offsets = field(default_factory=dict)
    frontier: Offsets = field(default_factory=dict)
    source_residue: list[Fingerprint] = field(default_factory=list)
    target_residue: list[Fingerprint] = field(default_factory=list)
    max_ts: dict[str, int] | None = None
    """``{"source": ms, "target": ms}``: the latest timestamp each side's audits read; None: unknown."""
    runs: int = 0
    verified_total: int = 0
    created_ms: int = 0
    updated_ms: int = 0

    def to_dict(self) -> StateDocument:
        """The JSON document written to the state file."""

        def offsets(o: Offsets) -> OffsetsDocument:
            return {t: {str(p): v for p, v in sorted(ps.items())} for t, ps in sorted(o.items())}

        doc: StateDocument = {
            "version": STATE_VERSION,
            "stack": self.stack,
            "link": self.link,
            "source": {"cluster": self.source_cluster, "cluster_id": self.source_id},
            "target": {"cluster": self.target_cluster, "cluster_id": self.target_id},
            "runs": self.runs,
            "verified_total": self.verified_total,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "bounds": {"source": offsets(self.source_bounds), "target": offsets(self.target_bounds)},
            "frontier": offsets(self.frontier),
            "residue": {
                "source": [list(f) for f in sorted(self.source_residue)],
                "target": [list(f) for f in sorted(self.target_residue)],
            },
        }
        if self.max_ts is not None:
            doc["max_ts"] = {"source": self.max_ts["source"], "target": self.max_ts["target"]}
        return doc

    @classmethod
    def from_dict(cls, data: Any) -> AuditState:
        """Parse a state document; ``ValueError``/``KeyError``/``TypeError`` when it is malformed."""
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {STATE_VERSION}")

        def offsets(o: Any) -> Offsets:
            if not isinstance(o, dict):
                raise TypeError("offsets are not an object")
            out: Offsets = {}
            for t, ps in o.items():
                if not isinstance(ps, dict):
                    raise TypeError(f"offsets of {t!r} are not an object")
                out[str(t)] = {int(p): _nonneg(v) for p, v in ps.items()}
            return out

        def fps(rows: Any) -> list[Fingerprint]:
            if not isinstance(rows, list):
                raise TypeError("residue is not a list")
            out = []
            for r in rows:
                if (
                    not isinstance(r, list)
                    or len(r) != 6
                    or not isinstance(r[0], str)
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in r[1:])
                ):
                    raise ValueError(f"bad residue entry {r!r:.80}")
                out.append(Fingerprint(*r))
            return out

        max_ts = data.get("max_ts")
        if max_ts is not None:
            if (
                not isinstance(max_ts, dict)
                or set(max_ts) != {"source", "target"}
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in max_ts.values())
            ):
                raise ValueError(f"bad max_ts {max_ts!r:.80}")
            max_ts = {"source": max_ts["source"], "target": max_ts["target"]}
        return cls(
            ref=LinkRef(
                stack=_str(data["stack"]),
                link=_str(data["link"]),
                source=_str(data["source"]["cluster"]),
                target=_str(data["target"]["cluster"]),
            ),
            max_ts=max_ts,
            source_id=_str(data["source"]["cluster_id"]),
            target_id=_str(data["target"]["cluster_id"]),
            source_bounds=offsets(data["bounds"]["source"]),
            target_bounds=offsets(data["bounds"]["target"]),
            frontier=offsets(data["frontier"]),
            source_residue=fps(data["residue"]["source"]),
            target_residue=fps(data["residue"]["target"]),
            runs=_nonneg(data["runs"]),
            verified_total=_nonneg(data["verified_total"]),
            created_ms=_nonneg(data["created_ms"]),
            updated_ms=_nonneg(data["updated_ms"]),
        )


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{v!r:.40} is not a string")
    return v


def _nonneg(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"{v!r:.40} is not a non-negative integer")
    return v


def _reset_hint(stack: str, link: str) -> str:
    return (
        f"run `drctl audit --stack {stack} --link {link} --reset` to discard it and start a full audit "
        "(the first run reads both sides from their earliest offsets)"
    )


def load_state(path: Path, ident: StateIdentity) -> AuditState | None:
    """The state of a link, ``None`` when no audit ran yet; a damaged or foreign file is a ConfigError."""
    stack, link = ident.stack, ident.link
    source_id, target_id = ident.source_id, ident.target_id
    store = _team_store()
    if store is not None:  # a postgres:// backend: the state is the team's, in its database
        where = f"audit state of link {link} in {store.shown}"
        doc = store.load_audit(stack, link)
        if doc is None:
            return None
        text = json.dumps(doc)
    else:
        where = f"audit state file {path}"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where} cannot be read ({exc}).", _reset_hint(stack, link)) from exc
    try:
        state = AuditState.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{where} is damaged ({type(exc).__name__}: {exc}); no audit was run.",
            _reset_hint(stack, link),
        ) from exc
    if state.ref != ident.ref:
        raise ConfigError(
            f"{where} belongs to stack {state.stack!r}, link {state.link!r} "
            f"({state.source_cluster}→{state.target_cluster}), not to stack {stack!r}, link {link!r}.",
            _reset_hint(stack, link),
        )
    for role, recorded, now in (("source", state.source_id, source_id), ("target", state.target_id, target_id)):
        if recorded != now:
            raise ConfigError(
                f"{where} was written for {role} cluster id {recorded!r}, but "
                f"the {role} cluster now has id {now!r} (re-created?); its offsets mean nothing there.",
                _reset_hint(stack, link),
            )
    return state


def save_state(path: Path, state: AuditState) -> None:
    """Write ``state`` atomically (temporary file in the same directory, fsync, rename), mode 0600; with a
    ``postgres://`` backend in the team database instead, in one transaction (``kdr_audit_state``)."""
    store = _team_store()
    if store is not None:
        store.save_audit(state.stack, state.link, state.to_dict())
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state.to_dict(), f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class AuditStore(Protocol):
    """Where audit states live instead of files: the team database (:class:`dr.failover.record.team_store.TeamStore`)."""

    shown: str

    def load_audit(self, stack: str, link: str) -> StateDocument | None:
        """The state document of ``link``, or None."""

    def save_audit(self, stack: str, link: str, state: StateDocument) -> None:
        """Write the state document of ``link``."""


def _no_team_store() -> AuditStore | None:
    return None


team_store_hook: Callable[[], AuditStore | None] = _no_team_store
"""The team database when the stack's Pulumi backend is ``postgres://``, else None: set by
:mod:`dr.failover.record.team_store` when drctl loads it (this package imports nothing above ``dr.kafka``).
With one, the audit state is a row there, so an audit from any machine continues at the bounds the
last one reached."""


def _team_store() -> AuditStore | None:
    return team_store_hook()


@dataclass
class Increment:
    """The outcome of matching one increment."""

    matched: int
    in_flight: list[Fingerprint]
    missing: list[Fingerprint]
    target_unmatched: list[Fingerprint]
    frontier: Offsets


def split_by_frontier(
    unmatched: Iterable[Fingerprint], frontier: Offsets
) -> tuple[list[Fingerprint], list[Fingerprint]]:
    """Unmatched source records → (missing, in flight): missing below their partition's frontier (the
    link copied a later record of that partition), in flight at or above it."""
    missing: list[Fingerprint] = []
    in_flight: list[Fingerprint] = []
    for f in unmatched:
        (missing if f.offset < frontier.get(f.topic, {}).get(f.partition, -1) else in_flight).append(f)
    return missing, in_flight


def match_increment(source: Iterable[Fingerprint], target: Iterable[Fingerprint], frontier: Offsets) -> Increment:
    """Match source records (residue + new) against target records (residue + new).

    Pairs equal ``(topic, key_hash, checksum)`` in ``(partition, offset)`` order; moves each source
    partition's frontier to its highest matched offset; splits the unmatched source records into
    missing (below their partition's frontier: the link copied a later record of that partition,
    so it has passed them) and in flight (the rest). ``frontier`` is not modified.
    """
    by_id: dict[tuple[str, int, int], tuple[list[Fingerprint], list[Fingerprint]]] = defaultdict(lambda: ([], []))
    for f in source:
        by_id[(f.topic, f.key_hash, f.checksum)][0].append(f)
    for f in target:
        by_id[(f.topic, f.key_hash, f.checksum)][1].append(f)
    new_frontier: Offsets = {t: dict(ps) for t, ps in frontier.items()}
    matched = 0
    unmatched_source: list[Fingerprint] = []
    unmatched_target: list[Fingerprint] = []
    for src, dst in by_id.values():
        src.sort(key=lambda f: (f.partition, f.offset))
        dst.sort(key=lambda f: (f.partition, f.offset))
        n = min(len(src), len(dst))
        matched += n
        for f in src[:n]:
            parts = new_frontier.setdefault(f.topic, {})
            if f.offset > parts.get(f.partition, -1):
                parts[f.partition] = f.offset
        unmatched_source.extend(src[n:])
        unmatched_target.extend(dst[n:])
    missing, in_flight = split_by_frontier(unmatched_source, new_frontier)
    return Increment(
        matched=matched,
        in_flight=sorted(in_flight),
        missing=sorted(missing),
        target_unmatched=sorted(unmatched_target),
        frontier=new_frontier,
    )
