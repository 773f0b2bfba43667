"""Which clusters a failover journal belongs to: their Kafka cluster IDs, and whether they are still the ones running.

A journal records the cluster ID of every cluster its run acts on when the run begins (and of the
standby once the run has built it). A journal is resumed only on those clusters: after the estate was
destroyed and rebuilt from the same stack file (new clusters, new IDs) or the stack was removed from
its backend (``pulumi stack rm``), the journal's steps describe clusters that no longer exist, and
resuming it would skip work that was never done on the clusters running now.

* :func:`read_cluster_id` — a local cluster's ID from its storage (``cluster.json``, else a node's
  ``meta.properties``; no process needed), an external one's from the admin client's metadata.
* :func:`mismatches` — pure: recorded IDs against current ones; a cluster whose ID cannot be read
  now (unreachable, not provisioned) is not counted as a mismatch, only a different ID is.
* :func:`foreign_reason` — why a journal does not belong to the estate now, or None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dr.base.errors import DRError

if TYPE_CHECKING:
    from dr.base.stackref import StackRef
    from dr.failover.frame.journal import Journal
    from dr.topology import Cluster, Topology

__all__ = ["Mismatch", "cluster_ids", "foreign_reason", "mismatches", "read_cluster_id", "refusal_text"]

#: Seconds to wait for an external cluster's metadata when recording its ID (an unreachable A in an
#: unplanned failover must not hold the run up for long).
EXTERNAL_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Mismatch:
    """One cluster whose ID differs from the one the journal recorded."""

    cluster: str
    recorded: str
    now: str

    def __str__(self) -> str:
        return f"{self.cluster}: journal {self.recorded}, now {self.now}"


def local_cluster_id(cluster_dir: Path) -> str | None:
    """The ID a local cluster was formatted with (``cluster.json``, else the first node's
    ``data/meta.properties``); None when it has no storage."""
    meta = cluster_dir / "cluster.json"
    try:
        return str(json.loads(meta.read_text())["cluster_id"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for props in sorted(cluster_dir.glob("node-*/data/meta.properties")):
        try:
            for line in props.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip() or None
        except OSError:
            continue
    return None


def read_cluster_id(topology: Topology, state: Path, cluster: Cluster) -> str | None:
    """The Kafka cluster ID of ``cluster`` now, or None when it cannot be read (no storage, unreachable)."""
    if cluster.is_local:
        return local_cluster_id(Path(state) / "clusters" / cluster.name)
    from dr.estate.estate import Estate
    from dr.kafka.client import cluster_metadata

    try:
        endpoint = Estate(topology, Path(state)).endpoint(cluster.name)
        found = cluster_metadata(endpoint, timeout=EXTERNAL_TIMEOUT_S).cluster_id
    except DRError:
        return None
    return str(found) if found else None


def cluster_ids(topology: Topology, state: Path, names: list[str]) -> dict[str, str]:
    """Name → Kafka cluster ID of each of ``names`` whose ID can be read now (the others are left out)."""
    found: dict[str, str] = {}
    for name in names:
        cid = read_cluster_id(topology, state, topology.cluster(name))
        if cid:
            found[name] = cid
    return found


def mismatches(recorded: dict[str, str], current: dict[str, str]) -> list[Mismatch]:
    """Clusters whose ID now differs from the recorded one (pure; a cluster absent from ``current``
    — unreachable, or not provisioned — is not a mismatch)."""
    return [
        Mismatch(name, cid, current[name])
        for name, cid in sorted(recorded.items())
        if name in current and current[name] != cid
    ]


def foreign_reason(ref: StackRef, journal: Journal) -> str | None:
    """Why ``journal`` does not belong to the estate of ``ref`` as it is now, or None when it does.

    It does not when a cluster it recorded now has another ID (the estate was destroyed and rebuilt),
    or when the stack it recorded in the backend is gone (``pulumi stack rm``). A journal written by
    a drctl that recorded neither (before this check existed) belongs, as it always did; so does a
    completed one (it is never resumed, and a fail-back reads it after its region was rebuilt).
    """
    from dr.estate.stack_state import checkpoint_file, file_backend_stacks
    from dr.topology import load_topology

    record = journal.record
    if journal.finished:
        return None  # a finished failover is never resumed: nothing of it would be skipped
    gone = file_backend_stacks(ref) is not None and checkpoint_file(ref) is None
    if record.stack_state and gone:
        return (
            f"the stack's Pulumi state {record.stack_state}, present when failover {journal.failover_id} began, "
            "is gone (the stack was removed from its backend, e.g. `pulumi stack rm`)"
        )
    if not record.clusters:
        return None
    try:
        topology = load_topology(record.stack, record.original_config)
    except DRError:
        return None
    names = [n for n in record.clusters if any(c.name == n for c in topology.clusters)]
    found = mismatches(record.clusters, cluster_ids(topology, ref.state_dir, names))
    if not found:
        return None
    return "its clusters are not the ones running now (" + "; ".join(str(m) for m in found) + ")"


def refusal_text(ref: StackRef, journal_id: str, reason: str) -> str:
    """The problem line of a journal that does not belong to the estate."""
    return (
        f"the journal of failover {journal_id} of stack {ref.name} belongs to another estate: {reason}; "
        "its steps were done on clusters that no longer exist, so it is never resumed"
    )
