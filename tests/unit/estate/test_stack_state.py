"""``dr.estate.stack.forget``: dropping a decommissioned cluster's ``ClusterAccess`` subtree from a deployment.

The deployment is hand-made (the shape ``pulumi stack export`` writes): a stack, two clusters with
their providers, two ``ClusterAccess`` components with users/topics/ACLs, a nested component under
A's access with a grandchild, a link of B whose dependencies and property dependencies reference A's
children, and look-alikes that must survive (another type named ``A-access``, a ``XA-access``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dr.estate.stack import forget

P = "urn:pulumi:s::kafka-dr::"
STACK = P + "pulumi:pulumi:Stack::kafka-dr-s"
ACCESS = "kafka-dr:index:ClusterAccess"
CLUSTER = "kafka-dr:index:KafkaCluster"
USER = "kafka:index/userScramCredential:UserScramCredential"
TOPIC = "kafka:index/topic:Topic"
ACL = "kafka:index/acl:Acl"

CLUSTER_A = P + f"{CLUSTER}::A"
PROVIDER_A = P + f"{CLUSTER}$pulumi:providers:kafka::A-kafka"
ACCESS_A = P + f"{ACCESS}::A-access"
A_USER = P + f"{ACCESS}${USER}::A-user-replicator"
A_TOPIC = P + f"{ACCESS}${TOPIC}::A-topic-orders"
A_ACL = P + f"{ACCESS}${ACL}::A-acl-replicator-topic-literal-~2a-read"
A_GRANTS = P + f"{ACCESS}$kafka-dr:index:Grants::A-grants"
A_GRANT_ACL = P + f"kafka-dr:index:Grants${ACL}::A-acl-billing-topic-literal-orders-read"

CLUSTER_B = P + f"{CLUSTER}::B"
PROVIDER_B = P + f"{CLUSTER}$pulumi:providers:kafka::B-kafka"
ACCESS_B = P + f"{ACCESS}::B-access"
B_USER = P + f"{ACCESS}${USER}::B-user-replicator"
B_ACL = P + f"{ACCESS}${ACL}::B-acl-replicator-topic-literal-~2a-all"
LINK = P + "kafka-dr:index:ReplicationLink::A-to-B"
LINK_PROCESS = P + "kafka-dr:index:ReplicationLink$pulumi-python:dynamic:Resource::A-to-B-mirrormaker2"

NOT_ACCESS = P + f"{CLUSTER}::A-access"  # another type, same name
XA_ACCESS = P + f"{ACCESS}::XA-access"  # same type, a name ending like A-access
XA_TOPIC = P + f"{ACCESS}${TOPIC}::XA-topic-orders"

A_SUBTREE = {ACCESS_A, A_USER, A_TOPIC, A_ACL, A_GRANTS, A_GRANT_ACL}


def _r(urn: str, typ: str, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "urn": urn,
        "type": typ,
        "custom": typ.startswith(("kafka:", "pulumi:providers", "pulumi-python")),
    }
    if parent is not None:
        r["parent"] = parent
    r.update(extra)
    return r


def deployment() -> dict[str, Any]:
    provider_a = f"{PROVIDER_A}::a-id"
    provider_b = f"{PROVIDER_B}::b-id"
    return {
        "manifest": {"time": "2024-01-01T00:00:00Z", "magic": "m", "version": "v3.259.0"},
        "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:abc"}},
        "resources": [
            _r(STACK, "pulumi:pulumi:Stack"),
            # the grandchild before its parent: removal must not depend on the order of the list
            _r(
                A_GRANT_ACL,
                ACL,
                A_GRANTS,
                provider=provider_a,
                dependencies=[A_USER],
                propertyDependencies={"aclPrincipal": [A_USER]},
            ),
            _r(CLUSTER_A, CLUSTER, STACK),
            _r(PROVIDER_A, "pulumi:providers:kafka", CLUSTER_A, id="a-id"),
            _r(ACCESS_A, ACCESS, STACK, dependencies=[PROVIDER_A]),
            _r(A_USER, USER, ACCESS_A, provider=provider_a, dependencies=[PROVIDER_A]),
            _r(A_TOPIC, TOPIC, ACCESS_A, provider=provider_a, retainOnDelete=True),
            _r(
                A_ACL,
                ACL,
                ACCESS_A,
                provider=provider_a,
                dependencies=[A_USER, A_TOPIC],
                propertyDependencies={"aclResourceName": [A_TOPIC], "aclPrincipal": [A_USER]},
            ),
            _r(A_GRANTS, "kafka-dr:index:Grants", ACCESS_A),
            _r(CLUSTER_B, CLUSTER, STACK),
            _r(PROVIDER_B, "pulumi:providers:kafka", CLUSTER_B, id="b-id"),
            _r(ACCESS_B, ACCESS, STACK),
            _r(B_USER, USER, ACCESS_B, provider=provider_b),
            _r(
                B_ACL,
                ACL,
                ACCESS_B,
                provider=provider_b,
                dependencies=[B_USER, A_USER],
                propertyDependencies={"aclPrincipal": [B_USER, A_USER]},
            ),
            _r(LINK, "kafka-dr:index:ReplicationLink", STACK, dependencies=[ACCESS_A, ACCESS_B]),
            _r(
                LINK_PROCESS,
                "pulumi-python:dynamic:Resource",
                LINK,
                dependencies=[A_USER, A_ACL, B_USER, B_ACL, A_GRANT_ACL],
                propertyDependencies={"source": [A_TOPIC, B_USER], "target": [A_ACL], "groups": []},
            ),
            _r(NOT_ACCESS, CLUSTER, STACK),
            _r(XA_ACCESS, ACCESS, STACK),
            _r(XA_TOPIC, TOPIC, XA_ACCESS, dependencies=[A_TOPIC]),
        ],
    }


def _by_urn(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in d["resources"]}


def test_the_access_subtree_is_removed_with_its_grandchildren() -> None:
    original = deployment()
    kept, dropped = forget(original, {"A-access"})
    urns = [r["urn"] for r in kept["resources"]]
    assert not A_SUBTREE & set(urns), f"still there: {sorted(A_SUBTREE & set(urns))}"
    assert dropped == len(A_SUBTREE) == 6
    assert len(urns) == len(original["resources"]) - dropped
    expected_order = [r["urn"] for r in original["resources"] if r["urn"] not in A_SUBTREE]
    assert urns == expected_order, "the remaining resources must keep their order"


def test_the_cluster_itself_and_its_provider_stay() -> None:
    kept, _ = forget(deployment(), {"A-access"})
    urns = _by_urn(kept)
    assert CLUSTER_A in urns and PROVIDER_A in urns and STACK in urns


def test_look_alikes_are_not_forgotten() -> None:
    kept, _ = forget(deployment(), {"A-access"})
    urns = _by_urn(kept)
    assert NOT_ACCESS in urns, "a KafkaCluster named A-access is not a ClusterAccess"
    assert XA_ACCESS in urns and XA_TOPIC in urns, "XA-access is another component"


def test_references_to_forgotten_resources_are_stripped() -> None:
    kept, _ = forget(deployment(), {"A-access"})
    urns = _by_urn(kept)
    assert urns[LINK]["dependencies"] == [ACCESS_B]
    assert urns[LINK_PROCESS]["dependencies"] == [B_USER, B_ACL]
    assert urns[LINK_PROCESS]["propertyDependencies"] == {"source": [B_USER], "target": [], "groups": []}
    assert urns[B_ACL]["dependencies"] == [B_USER]
    assert urns[B_ACL]["propertyDependencies"] == {"aclPrincipal": [B_USER]}
    assert urns[XA_TOPIC]["dependencies"] == []
    for r in kept["resources"]:
        refs = list(r.get("dependencies") or []) + [
            u for v in (r.get("propertyDependencies") or {}).values() for u in v
        ]
        refs += [r[key] for key in ("parent",) if key in r]
        assert not A_SUBTREE & set(refs), f"{r['urn']} still references {sorted(A_SUBTREE & set(refs))}"


def test_resources_of_other_clusters_are_untouched() -> None:
    original = deployment()
    before = _by_urn(copy.deepcopy(original))
    kept, _ = forget(original, {"A-access"})
    after = _by_urn(kept)
    for urn in (CLUSTER_B, PROVIDER_B, ACCESS_B, B_USER, STACK, CLUSTER_A, PROVIDER_A, NOT_ACCESS, XA_ACCESS):
        assert after[urn] == before[urn], f"{urn} was changed"


def test_the_other_deployment_fields_are_kept() -> None:
    original = deployment()
    kept, _ = forget(original, {"A-access"})
    assert set(kept) == set(original)
    assert kept["manifest"] == original["manifest"]
    assert kept["secrets_providers"] == original["secrets_providers"]


def test_the_input_deployment_is_not_mutated() -> None:
    original = deployment()
    snapshot = copy.deepcopy(original)
    _kept, dropped = forget(original, {"A-access"})
    assert dropped
    assert original == snapshot
    assert len(original["resources"]) == len(snapshot["resources"])


@pytest.mark.parametrize("names", [set(), {"Z-access"}, {"A"}, {"A-kafka"}, {"a-access"}])
def test_unknown_names_change_nothing(names: set[str]) -> None:
    original = deployment()
    snapshot = copy.deepcopy(original)
    kept, dropped = forget(original, names)
    assert dropped == 0
    assert kept == snapshot
    assert original == snapshot


def test_several_clusters_at_once() -> None:
    kept, dropped = forget(deployment(), {"A-access", "B-access", "Z-access"})
    urns = _by_urn(kept)
    gone = A_SUBTREE | {ACCESS_B, B_USER, B_ACL}
    assert dropped == len(gone)
    assert not gone & set(urns)
    assert urns[LINK]["dependencies"] == []
    assert urns[LINK_PROCESS]["dependencies"] == []
    assert urns[LINK_PROCESS]["propertyDependencies"] == {"source": [], "target": [], "groups": []}


def test_an_empty_deployment() -> None:
    assert forget({}, {"A-access"}) == ({}, 0)
    assert forget({"resources": []}, {"A-access"}) == ({"resources": []}, 0)


def test_pulumi_parallelism_comes_from_the_environment_and_bad_values_say_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dr.base.errors import ConfigError
    from dr.estate.stack import parallelism

    monkeypatch.delenv("KDR_PULUMI_PARALLEL", raising=False)
    assert parallelism() is None
    monkeypatch.setenv("KDR_PULUMI_PARALLEL", "32")
    assert parallelism() == 32
    for bad in ("0", "many", "-3"):
        monkeypatch.setenv("KDR_PULUMI_PARALLEL", bad)
        with pytest.raises(ConfigError) as info:
            parallelism()
        assert "KDR_PULUMI_PARALLEL" in str(info.value) and "e.g. 32" in str(info.value)
