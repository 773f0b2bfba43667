"""Fencing: take application principals' write access away from a cluster, give it back, grant it.

A fenced cluster keeps every other ACL (consumers still read, the replicator still copies); only
``ALLOW WRITE`` on topics is removed for the application principals. What was removed is
returned in JSON form so that a refused failover can put exactly those bindings back.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from dr.kafka_client import Endpoint, admin_client, create_acls, delete_acls, translate_kafka_error

__all__ = ["binding_from_dict", "binding_to_dict", "fence", "unfence", "write_bindings"]


def _write_filter(principal: str) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.ANY,
        f"User:{principal}",
        None,
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )


def binding_to_dict(binding: AclBinding) -> dict[str, str]:
    """An ACL binding as JSON-able names (for the journal)."""
    return {
        "resource_type": binding.restype.name,
        "name": binding.name,
        "pattern": binding.resource_pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission": binding.permission_type.name,
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
    """Every ``ALLOW WRITE`` topic ACL of ``principals`` on the cluster."""
    admin = admin_client(endpoint)
    found: list[AclBinding] = []
    for principal in principals:
        try:
            found += admin.describe_acls(_write_filter(principal)).result(timeout=30)
        except KafkaException as exc:
            raise translate_kafka_error(exc, f"listing the write ACLs of {principal!r}", endpoint) from exc
    return found


def fence(endpoint: Endpoint, principals: list[str]) -> list[dict[str, str]]:
    """Delete the topic write ACLs of ``principals``; return what was deleted (idempotent: [] the 2nd time).

    Raises when a write ACL is still present afterwards, so a fence is never assumed.
    """
    present = write_bindings(endpoint, principals)
    if present:
        delete_acls(endpoint, [_write_filter(p) for p in principals])
    left = write_bindings(endpoint, principals)
    if left:
        from dr.errors import FailoverError

        raise FailoverError(
            f"{len(left)} application write ACLs are still present on {endpoint.bootstrap} after deleting them.",
            "check who re-creates them (a running `drctl estate up`?) and rerun the failover",
        )
    return [binding_to_dict(b) for b in present]


def unfence(endpoint: Endpoint, removed: list[dict[str, Any]]) -> int:
    """Re-create the bindings :func:`fence` removed; return how many."""
    create_acls(endpoint, [binding_from_dict(d) for d in removed])
    return len(removed)
