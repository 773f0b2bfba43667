"""A cluster's topics, its ACLs and its SCRAM users as ONE resource each (``provisioning: batched``).

Python dynamic providers over confluent-kafka's AdminClient. Each operation is one admin request
for the whole set, where ``pulumi_kafka`` makes one request (and a poll) per topic or ACL:

* :class:`TopicSet` — create: one CreateTopics for every missing topic (done once every new partition
  has its log on the brokers: :func:`_await_logs`); a topic already there with
  the declared partitions and replication factor is adopted (its configs set), one that differs is
  refused. update: create added topics, add partitions, set changed configs. A topic removed from
  the set is *retained* in Kafka (as ``retain_on_delete`` of the individual topics), and ``delete``
  only forgets. read: one metadata request + one DescribeConfigs, so ``pulumi refresh`` records a
  missing topic or a changed config as drift and the next ``up`` restores it.
* :class:`AclSet` — the bindings as data. create: one CreateAcls; update: CreateAcls for every
  declared binding (idempotent on the broker) and DeleteAcls for the removed ones; delete: one
  DeleteAcls (skipped through ``deleted_with`` when the local cluster goes too). read: one
  DescribeAcls, so an ACL deleted behind Pulumi's back shows as drift.
* :class:`UserSet` — the SCRAM-SHA-512 users. create: one AlterUserScramCredentials upserting every user;
  update: one upserting the added users and those whose password changed (its fingerprint, as
  ``password_wo_version`` of the individual users) or that a refresh found gone, one deleting the
  removed; delete: one deletion (skipped through ``deleted_with`` with the local cluster). read: one
  DescribeUserScramCredentials, so a user deleted behind Pulumi's back shows as drift. At 200
  applications this is one request where ``pulumi_kafka`` made 200 (a failover's new standby waited
  about a minute for them).

The connection (bootstrap servers, the admin login, TLS) comes from the values the cluster's
``kafka.Provider`` gets. The admin password is a secret input, kept as a secret output (Pulumi
encrypts it in the state, as it does the provider's ``saslPassword``) and never put in a message.
The users' passwords are a secret input too; they are left out of the set's outputs (only their
fingerprints, secret, are kept to notice a rotation).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from stacks.engine_watch import die_with_engine

die_with_engine()  # in the provider process: exit when the engine does

__all__ = ["AclSet", "Connection", "TopicSet", "UserSet", "acl_binding"]

#: Inputs naming where and as whom: a change of these alone is an update, never a replacement.
_CONNECTION = ("cluster", "bootstrap", "username", "password", "mechanism", "security_protocol", "tls", "oauth")
_TIMEOUT = 60.0


class Connection(dict):
    """Where a set's admin requests go: the cluster's name (for messages), bootstrap servers, the
    admin login and the security protocol (plain values or Outputs; the password a secret Output)."""

    def __init__(
        self,
        *,
        cluster: str,
        bootstrap: pulumi.Input[str],
        username: str,
        password: pulumi.Input[str],
        mechanism: str,
        security_protocol: str,
        tls: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            cluster=cluster,
            bootstrap=bootstrap,
            username=username,
            password=pulumi.Output.secret(password),
            mechanism=mechanism,
            security_protocol=security_protocol,
        )
        if tls:  # file paths and a flag only (dr.kafka.tls.TlsFiles): the key stays in its 0600 file
            self["tls"] = tls


def _endpoint(props: dict[str, Any]):  # noqa: ANN202 - dr.kafka.client.Endpoint
    die_with_engine()
    from dr.kafka.client import Endpoint
    from dr.kafka.oauth import OAuthSettings
    from dr.kafka.tls import TlsFiles

    tls, oauth = props.get("tls"), props.get("oauth")
    return Endpoint(
        str(props["bootstrap"]),
        str(props["username"]),
        str(props["password"]),
        str(props["security_protocol"]),
        str(props["mechanism"]),
        TlsFiles(**tls) if tls else None,
        str(props.get("cluster", "")),
        OAuthSettings(**oauth) if oauth else None,
    )


def _admin(props: dict[str, Any]):  # noqa: ANN202 - confluent_kafka AdminClient
    from dr.kafka.client import admin_client

    return admin_client(_endpoint(props))


def _fail(props: dict[str, Any], what: str, exc: BaseException, step: str) -> RuntimeError:
    """The message the engine shows on the resource: the cluster, what failed, the next step.
    Only the error's own text is kept (librdkafka never repeats a password)."""
    from dr.base.errors import DRError

    reason = str(exc) if isinstance(exc, DRError) else f"{type(exc).__name__}: {exc}"
    return RuntimeError(f"cluster {props.get('cluster')}: {what} failed: {reason}. {step}")


_RETRY = "Check that the cluster runs (`drctl status`), then run `pulumi up` again (it resumes)."


@contextmanager
def _shown_as(props: dict[str, Any], what: str, step: str = _RETRY) -> Iterator[None]:
    """The block's failure as the engine shows it on the resource: an error this module worded
    (RuntimeError) as it is, any other through :func:`_fail` (the cluster, ``what`` failed, ``step``)."""
    try:
        yield
    except RuntimeError:
        raise
    except Exception as exc:  # noqa: BLE001 - shown on the resource
        raise _fail(props, what, exc, step) from None


def _connection_changed(olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
    return [k for k in _CONNECTION if olds.get(k) != news.get(k)]


# ------------------------------------------------------------------------------------- topics


def _observed_topics(props: dict[str, Any], names: list[str]) -> dict[str, dict[str, Any]]:
    """The named topics as the cluster holds them: partitions, replication factor, and the value of
    every config the set declares for them (missing topics left out). One metadata request and one
    DescribeConfigs."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = _admin(props)
    metadata = admin.list_topics(timeout=_TIMEOUT)
    present = [n for n in names if n in metadata.topics and metadata.topics[n].error is None]
    declared = {t["name"]: t for t in props.get("topics") or []}
    out: dict[str, dict[str, Any]] = {}
    for name in present:
        parts = metadata.topics[name].partitions
        rf = len(next(iter(parts.values())).replicas) if parts else 0
        out[name] = {"name": name, "partitions": len(parts), "replication_factor": rf, "config": {}}
    if present:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in present])
        for resource, fut in futures.items():
            entries = fut.result(timeout=_TIMEOUT)
            wanted = (declared.get(resource.name) or {}).get("config") or {}
            out[resource.name]["config"] = {
                k: entries[k].value for k in wanted if k in entries and entries[k].value is not None
            }
    return out


def _apply_topics(props: dict[str, Any], old: dict[str, dict[str, Any]] | None = None) -> None:
    """Make the cluster hold every topic of ``props``: one CreateTopics for the missing, partitions
    added, declared configs set (only where they differ). Refuses a topic whose partitions or
    replication factor cannot be reached without losing anything."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    wanted = {t["name"]: t for t in props.get("topics") or []}
    have = _observed_topics(props, sorted(wanted))
    admin = _admin(props)
    refused = []
    for name, t in sorted(wanted.items()):
        h = have.get(name)
        if h is None:
            continue
        if h["replication_factor"] != int(t["replication_factor"]):
            refused.append(
                f"{name}: replication factor {h['replication_factor']} on the cluster, {t['replication_factor']} declared"
            )
        elif h["partitions"] > int(t["partitions"]):
            refused.append(
                f"{name}: {h['partitions']} partitions on the cluster, {t['partitions']} declared (Kafka cannot remove partitions)"
            )
    if refused:
        raise RuntimeError(
            f"cluster {props.get('cluster')}: {len(refused)} existing topic(s) differ from the stack and were left "
            f"as they are: {'; '.join(refused[:5])}{' …' if len(refused) > 5 else ''}. Declare them as they are "
            "in the stack file (or change them with Kafka's own tools), then run `pulumi up` again"
        )
    missing = [
        NewTopic(
            name,
            num_partitions=int(t["partitions"]),
            replication_factor=int(t["replication_factor"]),
            config=dict(t.get("config") or {}),
        )
        for name, t in sorted(wanted.items())
        if name not in have
    ]
    errors: list[str] = []
    if missing:
        for name, fut in admin.create_topics(missing, operation_timeout=_TIMEOUT, request_timeout=_TIMEOUT).items():
            try:
                fut.result(timeout=_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - gathered, reported together below
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    errors.append(f"{name}: {exc}")
    if missing and not errors:
        _await_logs(props, {t.topic: t.num_partitions for t in missing})
    grow = {
        name: NewPartitions(name, int(t["partitions"]))
        for name, t in wanted.items()
        if name in have and have[name]["partitions"] < int(t["partitions"])
    }
    if grow:
        for name, fut in admin.create_partitions(list(grow.values()), request_timeout=_TIMEOUT).items():
            try:
                fut.result(timeout=_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{name} partitions: {exc}")
    # configs of existing topics: set what differs; unset what the previous state declared and no longer does
    alter = []
    for name, t in sorted(wanted.items()):
        if name not in have:
            continue
        desired = dict(t.get("config") or {})
        now = have[name]["config"]
        dropped = set(((old or {}).get(name) or {}).get("config") or {}) - set(desired)
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in desired.items()
            if now.get(k) != v
        ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in sorted(dropped)]
        if entries:
            alter.append(ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries))
    if alter:
        for resource, fut in admin.incremental_alter_configs(alter).items():
            try:
                fut.result(timeout=_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{resource.name} configs: {exc}")
    if errors:
        raise RuntimeError(
            f"cluster {props.get('cluster')}: {len(errors)} topic change(s) failed: {'; '.join(errors[:5])}"
            f"{' …' if len(errors) > 5 else ''}. {_RETRY}"
        )


_LOGS_TIMEOUT = 300.0


def _await_logs(props: dict[str, Any], created: dict[str, int]) -> None:
    """Wait until the brokers hold a log for every partition of the topics just ``created`` (name →
    partitions): each answers a ListOffsets. CreateTopics returns once the controller committed them, but a
    broker applies the metadata log in order, and thousands of new partitions hold it for tens of seconds
    (4,000 took 24–39 s on one broker here): whatever is committed behind them — the link's replicator's
    SCRAM user, MirrorMaker 2's own internal topics, whose wait Connect bounds at 30 s — would not be
    usable until then. The set is created when its partitions can be used."""
    from dr.kafka.offsets import end_offsets
    from dr.runtime.process import wait_until

    endpoint = _endpoint(props)
    names = sorted(created)
    held: dict[str, int] = {}

    def ready() -> bool:
        try:
            ends = end_offsets(endpoint, names, timeout=5.0)
        except Exception:  # noqa: BLE001 - a partition without its log yet: not ready
            return False
        held.clear()
        for topic, _partition in ends:
            held[topic] = held.get(topic, 0) + 1
        return all(held.get(name, 0) >= n for name, n in created.items())

    if not wait_until(ready, _LOGS_TIMEOUT, interval=0.5):
        short = sorted(name for name, n in created.items() if held.get(name, 0) < n)
        raise RuntimeError(
            f"cluster {props.get('cluster')}: {len(short)} created topic(s) have partitions without a log on their "
            f"brokers after {_LOGS_TIMEOUT:.0f}s: {', '.join(short[:5])}{' …' if len(short) > 5 else ''}. Check the "
            "brokers' logs and disks (`drctl status`), then run `pulumi up` again (it resumes)"
        )


def _topic_outs(props: dict[str, Any]) -> dict[str, Any]:
    return {**props, "count": len(props.get("topics") or [])}


class _TopicSetProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        with _shown_as(props, f"creating {len(props.get('topics') or [])} topics"):
            _apply_topics(props)
        return CreateResult(id_=str(props["cluster"]), outs=_topic_outs(props))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        names = [t["name"] for t in props.get("topics") or []]
        try:
            seen = _observed_topics(props, names)
        except Exception as exc:  # noqa: BLE001
            raise _fail(props, "reading the topics", exc, _RETRY) from None
        return ReadResult(id_, {**_topic_outs(props), "topics": [seen[n] for n in names if n in seen]})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = _connection_changed(olds, news)
        if _topic_key(olds.get("topics")) != _topic_key(news.get("topics")):
            changed.append("topics")
        return DiffResult(changes=bool(changed), replaces=[], stables=["cluster"], delete_before_replace=False)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        old = {t["name"]: t for t in olds.get("topics") or []}
        with _shown_as(news, "changing the topics"):
            _apply_topics(news, old)
        return UpdateResult(outs=_topic_outs(news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        return None  # retained: the topics and their records stay in Kafka (delete them with Kafka's tools)


def _topic_key(topics: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (
            str(t["name"]),
            int(t["partitions"]),
            int(t["replication_factor"]),
            tuple(sorted((str(k), str(v)) for k, v in (t.get("config") or {}).items())),
        )
        for t in topics or []
    )


class TopicSet(Resource):
    """Every topic of one cluster as one resource (created, changed and read in one admin call each)."""

    count: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        *,
        connection: Connection,
        topics: list[dict[str, Any]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        secret = pulumi.ResourceOptions(additional_secret_outputs=["password"])
        super().__init__(
            _TopicSetProvider(),
            name,
            {**connection, "topics": topics, "count": None},
            pulumi.ResourceOptions.merge(opts, secret),
        )


# ------------------------------------------------------------------------------------- ACLs


def acl_binding(
    *, principal: str, operation: str, resource_type: str, resource_name: str, pattern: str
) -> dict[str, str]:
    """One ALLOW binding from any host as plain data (what :class:`AclSet` holds)."""
    return {
        "principal": principal,
        "operation": operation,
        "resource_type": resource_type,
        "resource_name": resource_name,
        "pattern": pattern,
    }


def _key(b: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return (
        str(b["principal"]),
        str(b["resource_type"]),
        str(b["resource_name"]),
        str(b["pattern"]),
        str(b["operation"]),
    )


def _native(b: dict[str, Any], *, as_filter: bool = False):  # noqa: ANN202 - AclBinding(Filter)
    """The binding for confluent-kafka; ``as_filter``: a DeleteAcls filter matching exactly it."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kind = AclBindingFilter if as_filter else AclBinding
    return kind(
        ResourceType[_rtype(str(b["resource_type"]))],
        str(b["resource_name"]),
        ResourcePatternType[str(b["pattern"]).upper()],
        str(b["principal"]),
        "*",
        AclOperation[_snake(str(b["operation"]))],
        AclPermissionType.ALLOW,
    )


def _rtype(name: str) -> str:
    """pulumi_kafka's resource type → confluent-kafka's (``Cluster`` is ``BROKER`` there)."""
    return {"Cluster": "BROKER", "TransactionalID": "TRANSACTIONAL_ID"}.get(name) or _snake(name)


def _snake(camel: str) -> str:
    """``DescribeConfigs`` → ``DESCRIBE_CONFIGS`` (pulumi_kafka's operation names → confluent-kafka's)."""
    out = "".join(f"_{ch}" if ch.isupper() and i else ch for i, ch in enumerate(camel))
    return out.upper()


def _observed_acls(props: dict[str, Any]) -> set[tuple[str, str, str, str, str]]:
    """Every ALLOW binding from any host on the cluster (one DescribeAcls), as keys."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    admin = _admin(props)
    match_any = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ALLOW
    )
    found = admin.describe_acls(match_any, request_timeout=_TIMEOUT).result(timeout=_TIMEOUT)
    return {
        (b.principal, b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)
        for b in found
        if b.host == "*"
    }


def _normal(k: tuple[str, str, str, str, str]) -> tuple[str, str, str, str, str]:
    """A binding key in confluent-kafka's enum spelling (comparable with :func:`_observed_acls`)."""
    principal, rtype, name, pattern, op = k
    return (principal, _rtype(rtype), name, pattern.upper(), _snake(op))


def _create_acls(props: dict[str, Any], bindings: list[dict[str, Any]]) -> None:
    if not bindings:
        return
    admin = _admin(props)
    errors = []
    for binding, fut in admin.create_acls([_native(b) for b in bindings], request_timeout=_TIMEOUT).items():
        try:
            fut.result(timeout=_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{binding}: {exc}")
    if errors:
        raise RuntimeError(
            f"cluster {props.get('cluster')}: {len(errors)} ACL(s) not created: {'; '.join(errors[:3])}"
            f"{' …' if len(errors) > 3 else ''}. {_RETRY}"
        )


def _delete_acls(props: dict[str, Any], bindings: list[dict[str, Any]]) -> None:
    if not bindings:
        return
    admin = _admin(props)
    filters = [_native(b, as_filter=True) for b in bindings]
    for _f, fut in admin.delete_acls(filters, request_timeout=_TIMEOUT).items():
        fut.result(timeout=_TIMEOUT)


class _AclSetProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        acls = props.get("acls") or []
        with _shown_as(props, f"creating {len(acls)} ACLs"):
            _create_acls(props, acls)
        return CreateResult(id_=str(props["cluster"]), outs={**props, "count": len(acls)})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            seen = _observed_acls(props)
        except Exception as exc:  # noqa: BLE001
            raise _fail(props, "reading the ACLs", exc, _RETRY) from None
        kept = [b for b in props.get("acls") or [] if _normal(_key(b)) in seen]
        return ReadResult(id_, {**props, "acls": kept, "count": len(kept)})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = _connection_changed(olds, news)
        if sorted(map(_key, olds.get("acls") or [])) != sorted(map(_key, news.get("acls") or [])):
            changed.append("acls")
        return DiffResult(changes=bool(changed), replaces=[], stables=["cluster"], delete_before_replace=False)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        wanted = {_key(b) for b in news.get("acls") or []}
        removed = [b for b in olds.get("acls") or [] if _key(b) not in wanted]
        with _shown_as(news, "changing the ACLs"):
            _create_acls(news, news.get("acls") or [])
            _delete_acls(news, removed)
        return UpdateResult(outs={**news, "count": len(news.get("acls") or [])})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        try:
            _delete_acls(props, props.get("acls") or [])
        except Exception as exc:  # noqa: BLE001
            raise _fail(
                props,
                "deleting the ACLs",
                exc,
                "Start the cluster and run the command again, or drop the set from the state with "
                "`pulumi state delete <urn>` if the cluster is gone for good",
            ) from None


class AclSet(Resource):
    """Every ACL of one cluster as one resource (created, changed and read in one admin call each)."""

    count: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        *,
        connection: Connection,
        acls: list[dict[str, str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        secret = pulumi.ResourceOptions(additional_secret_outputs=["password"])
        super().__init__(
            _AclSetProvider(),
            name,
            {**connection, "acls": acls, "count": None},
            pulumi.ResourceOptions.merge(opts, secret),
        )


# ------------------------------------------------------------------------------------- users

_SCRAM_ITERATIONS = 4096  # pulumi_kafka's UserScramCredential default


def _upsert_users(props: dict[str, Any], names: list[str]) -> None:
    """One AlterUserScramCredentials: every user of ``names`` with its password from ``props``."""
    from dr.kafka.client import upsert_scram_users

    passwords = props.get("passwords") or {}
    upsert_scram_users(_endpoint(props), {n: str(passwords[n]) for n in names}, _SCRAM_ITERATIONS)


def _delete_users(props: dict[str, Any], names: list[str]) -> None:
    """One AlterUserScramCredentials deleting the SCRAM-SHA-512 credential of every user of ``names``
    (one already gone counts as deleted)."""
    if not names:
        return
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    admin = _admin(props)  # held until every answer is in: a collected client cancels its requests
    deletions = [UserScramCredentialDeletion(n, ScramMechanism.SCRAM_SHA_512) for n in names]
    errors = []
    for user, fut in admin.alter_user_scram_credentials(deletions, request_timeout=_TIMEOUT).items():
        try:
            fut.result(timeout=_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - gathered, reported together below
            if not _not_found(exc):
                errors.append(f"{user}: {exc}")
    if errors:
        raise RuntimeError(
            f"cluster {props.get('cluster')}: {len(errors)} SCRAM user(s) not deleted: {'; '.join(errors[:3])}"
            f"{' …' if len(errors) > 3 else ''}. {_RETRY}"
        )


def _not_found(exc: BaseException) -> bool:
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError.RESOURCE_NOT_FOUND


def _observed_users(props: dict[str, Any], names: list[str]) -> set[str]:
    """Which of ``names`` hold a SCRAM-SHA-512 credential on the cluster (one DescribeUserScramCredentials,
    asked only once the cluster lets the admin describe it: librdkafka aborts the process on that refusal)."""
    if not names:
        return set()
    from confluent_kafka.admin import ScramMechanism

    from dr.kafka.live import may_describe_cluster

    admin = _admin(props)
    if not may_describe_cluster(admin, _endpoint(props), _TIMEOUT):
        raise RuntimeError(
            f"cluster {props.get('cluster')}: the admin login may not describe the cluster, so its SCRAM users "
            "cannot be read. Grant it DESCRIBE on the cluster (or run `pulumi up` without --refresh)"
        )
    seen = set()
    futures = admin.describe_user_scram_credentials(list(names), request_timeout=_TIMEOUT)
    for user, fut in futures.items():
        try:
            infos = fut.result(timeout=_TIMEOUT).scram_credential_infos or []
        except Exception as exc:  # noqa: BLE001
            if _not_found(exc):
                continue
            raise
        if any(i.mechanism == ScramMechanism.SCRAM_SHA_512 for i in infos):
            seen.add(user)
    return seen


def _user_outs(props: dict[str, Any]) -> dict[str, Any]:
    """The set's outputs: its inputs without the passwords (their fingerprints stay, secret)."""
    return {**{k: v for k, v in props.items() if k != "passwords"}, "count": len(props.get("users") or [])}


def _user_versions(props: dict[str, Any]) -> dict[str, str]:
    versions = props.get("versions") or {}
    return {str(u): str(versions.get(u, "")) for u in props.get("users") or []}


def changed_users(olds: dict[str, Any], news: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What an update does (pure): the users to upsert (added, re-passworded, or found gone by a refresh)
    and the users to delete (no longer declared)."""
    old, new = _user_versions(olds), _user_versions(news)
    return sorted(u for u, v in new.items() if old.get(u) != v), sorted(set(old) - set(new))


class _UserSetProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        users = sorted(props.get("users") or [])
        with _shown_as(props, f"creating {len(users)} SCRAM users"):
            _upsert_users(props, users)
        return CreateResult(id_=str(props["cluster"]), outs=_user_outs(props))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        names = list(props.get("users") or [])
        with _shown_as(props, "reading the SCRAM users"):
            seen = _observed_users(props, names)
        kept = [u for u in names if u in seen]
        versions = {u: v for u, v in (props.get("versions") or {}).items() if u in seen}
        return ReadResult(id_, {**_user_outs(props), "users": kept, "versions": versions, "count": len(kept)})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = _connection_changed(olds, news)
        upsert, remove = changed_users(olds, news)
        if upsert or remove:
            changed.append("users")
        return DiffResult(changes=bool(changed), replaces=[], stables=["cluster"], delete_before_replace=False)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        upsert, remove = changed_users(olds, news)
        with _shown_as(news, "changing the SCRAM users"):
            _upsert_users(news, upsert)
            _delete_users(news, remove)
        return UpdateResult(outs=_user_outs(news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        try:
            _delete_users(props, list(props.get("users") or []))
        except Exception as exc:  # noqa: BLE001
            raise _fail(
                props,
                "deleting the SCRAM users",
                exc,
                "Start the cluster and run the command again, or drop the set from the state with "
                "`pulumi state delete <urn>` if the cluster is gone for good",
            ) from None


class UserSet(Resource):
    """Every SCRAM-SHA-512 user of one cluster as one resource (created, changed and read in one admin call each).

    ``passwords`` (user → password) is a secret input and never an output; ``versions`` (user → the
    password's fingerprint, :func:`stacks.access.password_version`) is kept, secret, to notice a rotation."""

    count: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        *,
        connection: Connection,
        passwords: dict[str, pulumi.Output[str]],
        versions: dict[str, pulumi.Output[str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        secret = pulumi.ResourceOptions(additional_secret_outputs=["password", "versions"])
        super().__init__(
            _UserSetProvider(),
            name,
            {
                **connection,
                "users": sorted(passwords),
                "versions": pulumi.Output.secret(versions),
                "passwords": pulumi.Output.secret(passwords),
                "count": None,
            },
            pulumi.ResourceOptions.merge(opts, secret),
        )
