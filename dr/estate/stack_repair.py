"""Repairs of a stack's Pulumi state after a killed engine or a lost cluster (pure functions on a deployment).

* :func:`settle_pending` — an engine killed mid-operation leaves *pending operations* in the
  checkpoint. ``pulumi up`` only warns about them, and an interrupted *create* is simply missing
  from the state, so the next ``up`` creates it again. Every create of this program is idempotent
  (clusters and MirrorMaker 2 start what is not running, SCRAM credentials and ACLs are upserts)
  except a Kafka topic's ("Topic with this name already exists"): an interrupted topic create is
  therefore *adopted* — entered into the state under its name, for the ``refresh`` that follows to
  read (or drop, if the create never reached the cluster). Other pending operations are dropped:
  the resource is still in the state with its previous values, and the refresh reads it.
* :func:`unreachable_local_clusters` — the local clusters of the state whose brokers do not all run
  or whose data is gone: their users, topics and ACLs cannot be read or deleted through Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LOCAL_CLUSTER_SUFFIX", "TOPIC_TYPE", "local_clusters", "settle_pending", "unreachable_local_clusters"]

TOPIC_TYPE = "kafka:index/topic:Topic"
LOCAL_CLUSTER_SUFFIX = "-brokers"
_DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"


def _refs(resource: dict[str, Any]) -> set[str]:
    """URNs ``resource`` needs before it in the deployment (parent, provider, dependencies)."""
    refs = {resource.get("parent") or "", *(resource.get("dependencies") or [])}
    provider = resource.get("provider") or ""
    if provider:
        refs.add(provider.rsplit("::", 1)[0])
    return {r for r in refs if r}


def settle_pending(deployment: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The deployment without pending operations, interrupted topic creates adopted; and what was done."""
    pending = deployment.get("pending_operations") or []
    if not pending:
        return deployment, []
    resources = [dict(r) for r in deployment.get("resources") or []]
    notes: list[str] = []
    for op in pending:
        resource = dict(op.get("resource") or {})
        urn = str(resource.get("urn", "?"))
        kind = str(op.get("type", "?"))
        name = urn.rsplit("::", 1)[-1]
        present = any(r.get("urn") == urn for r in resources)
        if kind == "creating" and resource.get("type") == TOPIC_TYPE and not present:
            inputs = dict(resource.get("inputs") or {})
            topic = str(inputs.get("name") or name)
            adopted = {**resource, "id": topic, "outputs": {**inputs, "id": topic}}
            needs = _refs(adopted)
            after = max((i for i, r in enumerate(resources) if r.get("urn") in needs), default=-1)
            resources.insert(after + 1, adopted)
            notes.append(f"adopted topic {topic!r} ({name}): its create was interrupted; the refresh reads it")
        elif kind == "creating":
            notes.append(f"dropped the interrupted create of {name}: the next up creates it (idempotent)")
        else:
            notes.append(f"cleared the interrupted {kind} of {name}: the refresh reads its real state")
    return {**deployment, "resources": resources, "pending_operations": []}, notes


def local_clusters(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Cluster name → the recorded inputs of each local cluster resource of the deployment."""
    found: dict[str, dict[str, Any]] = {}
    for r in deployment.get("resources") or []:
        name = str(r.get("urn", "")).rsplit("::", 1)[-1]
        if r.get("type") == _DYNAMIC_TYPE and name.endswith(LOCAL_CLUSTER_SUFFIX):
            props = r.get("outputs") or r.get("inputs") or {}
            if {"name", "brokers", "base_port", "state_dir"} <= props.keys():
                found[str(props["name"])] = props
    return found


def unreachable_local_clusters(deployment: dict[str, Any], running: Callable[[dict[str, Any]], str]) -> dict[str, str]:
    """Name → why, for each local cluster of the deployment whose ``running(props)`` state is not
    ``running`` (``stopped``, ``degraded`` or ``absent`` — its data directory is gone)."""
    out: dict[str, str] = {}
    for name, props in local_clusters(deployment).items():
        state = running(props)
        if state != "running":
            where = Path(str(props["state_dir"])) / "clusters" / name
            out[name] = f"its data directory {where} is gone" if state == "absent" else f"its brokers are {state}"
    return out
