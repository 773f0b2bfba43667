"""Fencing: take application principals' write access away from a cluster, give it back, grant it.

A fenced cluster keeps every other ACL (consumers still read, the replicator still copies); only
``ALLOW WRITE`` on topics is removed for the application principals. What was removed is
returned in JSON form so that a refused failover can put exactly those bindings back.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from dr.base.errors import FailoverError
from dr.kafka.client import Endpoint, admin_client, create_acls, delete_acls, kafka_errors

__all__ = ["binding_from_dict", "binding_to_dict", "fence", "unfence", "write_bindings"]


def _write_filter(principal: str | None) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC,
        None,  # type: ignore[arg-type]  # None matches any name in a filter; the stub says str
        ResourcePatternType.ANY,
        None if principal is None else f"User:{principal}",  # type: ignore[arg-type]  # None: any principal
        None,  # type: ignore[arg-type]  # any host
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )


def _name(value: Enum | str | int) -> str:
    """The enum member's name (confluent-kafka turns the str/int a binding was built from into one)."""
    return value.name if isinstance(value, Enum) else str(value)


def binding_to_dict(binding: AclBinding) -> dict[str, str]:
    """An ACL binding as JSON-able names (for the journal)."""
    return {
        "resource_type": _name(binding.restype),
        "name": binding.name,
        "pattern": _name(binding.resource_pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": _name(binding.operation),
        "permission": _name(binding.permission_type),
    }


def binding_from_dict(d: dict[str, str]) -> AclBinding:
    """The inverse of :func:`binding_to_dict`."""
    return AclBinding(
        ResourceType[d["resource_type"]],
        d["name"],
        ResourcePatternType[d["pattern"]],
        d["principal"],
        d["host"],
        AclOperation[d["operation"]],
        AclPermissionType[d["permission"]],
    )


def write_bindings(endpoint: Endpoint, principals: list[str]) -> list[AclBinding]:
    """Every ``ALLOW WRITE`` topic ACL of ``principals`` on the cluster (one DescribeAcls call for all)."""
    if not principals:
        return []
    wanted = {f"User:{p}" for p in principals}
    admin = admin_client(endpoint)  # held until the result is in: a collected client fails its futures
    with kafka_errors("listing the application write ACLs", endpoint):
        every = admin.describe_acls(_write_filter(None)).result(timeout=30)
    return [b for b in every if b.principal in wanted]


#: How long a deleted ACL may still be reported by a broker that has not applied the deletion yet.
PROPAGATION_S = 10.0


def fence(endpoint: Endpoint, principals: list[str]) -> list[dict[str, str]]:
    """Delete the topic write ACLs of ``principals``; return what was deleted (idempotent: [] the 2nd time).

    Raises when a write ACL is still present afterwards, so a fence is never assumed.
    """
    present = write_bindings(endpoint, principals)
    if present:  # one DeleteAcls request carrying one filter per principal that holds any
        delete_acls(endpoint, [_write_filter(p) for p in sorted({b.principal.removeprefix("User:") for b in present})])
    left = write_bindings(endpoint, principals)
    deadline = time.monotonic() + PROPAGATION_S
    while left and time.monotonic() < deadline:
        # the brokers apply the deletion from the metadata log one by one; the one that answers the
        # DescribeAcls may not have it yet (seen on a loaded 3-broker hub): look again before refusing
        time.sleep(0.25)
        left = write_bindings(endpoint, principals)
    if left:
        raise FailoverError(
            f"{len(left)} application write ACLs are still present on {endpoint.bootstrap} after deleting them.",
            "check who re-creates them (a running `drctl estate up`?) and rerun the failover",
        )
    return [binding_to_dict(b) for b in present]


def unfence(endpoint: Endpoint, removed: list[dict[str, Any]]) -> int:
    """Re-create the bindings :func:`fence` removed; return how many."""
    create_acls(endpoint, [binding_from_dict(d) for d in removed])
    return len(removed)
