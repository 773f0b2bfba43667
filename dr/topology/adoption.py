"""From what a running cluster holds to a stack file proposal (``drctl estate adopt``), as a pure function.

:func:`derive` reads a :class:`~dr.kafka.live.LiveCluster` (topics, ACLs, SCRAM users, quotas) and returns
an :class:`Adoption`: the topics with their partitions, replication factor and topic-level configurations;
one application per principal, from its ACLs — literal Write on a topic → ``produces``, literal Read →
``consumes``, a prefixed Write/Read → ``produces_prefix``/``consumes_prefix`` (kept as a prefix), Read on a
group → ``consumer_group`` (the Describe rights Kafka implies beside them are covered); every SCRAM user as
an application; user quotas on their application and the default user's as ``default_quota``.

Whatever a stack file cannot declare is listed in :attr:`Adoption.unexpressed` with the reason — never
dropped in silence: DENY rules, bindings limited to a host, wildcard and non-``User`` principals, rights
beyond an application's role (Create, Alter, All, cluster or transactional-id resources…), a second prefix
or group, quotas on client ids or IPs, rights of the stack's own admin and replicator. Those bindings stay
on the cluster as they are: the product neither declares nor removes them (nor copies them to B).

:func:`adopted_topology` puts the adoption into the stack's topology through the product's own validation
(:meth:`~dr.topology.model.Topology.revised`); a topic or an application that a rule refuses is left out
and listed with the rule's message, so the proposal always validates.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from dr.base.errors import ConfigError
from dr.kafka.live import LiveAcl, LiveCluster, LiveQuota
from dr.topology.model import Application, Quota, Topic, Topology

__all__ = ["KEPT", "Adoption", "Unexpressed", "adopted_topology", "derive"]

_QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
_ROLE = (
    "beyond an application's role (the product grants Write and Describe on the topics it produces, Read and "
    "Describe on those it consumes, Read on its consumer group)"
)
KEPT = "each stays on the cluster as it is; the product neither declares nor removes it, nor copies it to B"


@dataclass(frozen=True, order=True)
class Unexpressed:
    """One thing the cluster holds that the proposal does not declare, and why."""

    item: str
    reason: str

    def text(self) -> str:
        """``item: reason``."""
        return f"{self.item}: {self.reason}"


@dataclass
class Adoption:
    """The stack file proposal's content, and what it cannot express."""

    topics: list[Topic] = field(default_factory=list)
    applications: list[Application] = field(default_factory=list)
    default_quota: Quota | None = None
    unexpressed: list[Unexpressed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the team must do before the first ``pulumi up`` (the applications' passwords)."""


@dataclass
class _Grants:
    produces: list[str] = field(default_factory=list)
    consumes: list[str] = field(default_factory=list)
    produces_prefix: str | None = None
    consumes_prefix: str | None = None
    group: str | None = None


def _user(principal: str) -> str | None:
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else None


def _refusal(acl: LiveAcl, own: dict[str, str]) -> str | None:
    """Why ``acl`` cannot be part of an application, or None when its principal and shape may be."""
    name = _user(acl.principal)
    if acl.permission != "Allow":
        return "a DENY rule: the product declares only ALLOW rules (what an application may do)"
    if acl.host != "*":
        return f"limited to host {acl.host}: the product's rules allow any host"
    if name is None:
        return "not a User principal (the product's applications are users)"
    if name == "*":
        return "a wildcard principal (every user): an application is one user"
    if name in own:
        return f"{own[name]}, whose rights the product declares itself"
    if acl.resource_name == "*" and acl.pattern == "Literal":
        return "a wildcard resource (every topic or group): an application names its own"
    return None


def _place(acl: LiveAcl, grants: _Grants, topics: set[str]) -> str | None:
    """Put ``acl`` in ``grants``; the reason it cannot go there, or None when it went."""
    kind, pattern, op, name = acl.resource_type, acl.pattern, acl.operation, acl.resource_name
    if kind == "Topic" and pattern == "Literal" and op in ("Write", "Read"):
        if name not in topics:
            return f"names topic {name!r}, which the cluster does not hold (a stack declares its topics)"
        (grants.produces if op == "Write" else grants.consumes).append(name)
        return None
    if kind == "Topic" and pattern == "Prefixed" and op in ("Write", "Read"):
        attr = "produces_prefix" if op == "Write" else "consumes_prefix"
        if getattr(grants, attr) is not None:
            return f"a second {attr} (an application has one, here {getattr(grants, attr)!r})"
        setattr(grants, attr, name)
        return None
    if kind == "Group" and pattern == "Literal" and op == "Read":
        if grants.group is not None:
            return f"a second consumer group (an application has one, here {grants.group!r})"
        grants.group = name
        return None
    return f"{op} on a {pattern.lower()} {kind} is {_ROLE}"


def _implied(acl: LiveAcl, held: set[tuple[str, str, str, str]]) -> bool:
    """A Describe that Kafka's authorizer already allows to whoever may Read or Write the same resource."""
    if acl.operation != "Describe":
        return False
    return any((acl.resource_type, acl.resource_name, acl.pattern, op) in held for op in ("Read", "Write"))


def _quota_of(quota: LiveQuota, unexpressed: list[Unexpressed]) -> Quota | None:
    """The declarable part of ``quota``; every other limit goes to ``unexpressed``."""
    limits: dict[str, int] = {}
    for key, value in sorted(quota.configs.items()):
        if key not in _QUOTA_KEYS:
            unexpressed.append(
                Unexpressed(
                    f"quota {key}={value:g} on {quota.text()}",
                    f"a stack declares only {', '.join(_QUOTA_KEYS)}",
                )
            )
        elif value != int(value) or value < 1:
            unexpressed.append(
                Unexpressed(
                    f"quota {key}={value:g} on {quota.text()}",
                    "a stack declares whole numbers of at least 1",
                )
            )
        else:
            limits[key] = int(value)
    return Quota.model_validate(limits) if limits else None


def derive(live: LiveCluster, *, own: dict[str, str]) -> Adoption:
    """The stack file content ``live`` proposes, and what it cannot express.

    ``own`` maps the users the product runs as (the stack's admin, replicator, each cluster's admin user)
    to a description: their ACLs and quotas are listed as the product's, never made applications.
    """
    out = Adoption()
    topic_names = {t.name for t in live.topics}
    for t in sorted(live.topics, key=lambda t: t.name):
        out.topics.append(
            Topic(
                name=t.name,
                partitions=t.partitions,
                replication_factor=t.replication_factor,
                min_insync_replicas=t.min_insync_replicas,
                configs=dict(sorted(t.configs.items())),
            )
        )
    held: dict[str, set[tuple[str, str, str, str]]] = defaultdict(set)
    for acl in live.acls:
        if acl.permission == "Allow" and acl.host == "*":
            held[acl.principal].add((acl.resource_type, acl.resource_name, acl.pattern, acl.operation))
    grants: dict[str, _Grants] = {}
    for acl in sorted(live.acls):
        reason = _refusal(acl, own)
        if reason is None and _implied(acl, held[acl.principal]):
            continue
        if reason is None:
            user = _user(acl.principal) or ""
            mine = grants.get(user, _Grants())
            reason = _place(acl, mine, topic_names)
            if reason is None:  # a principal whose every binding is listed gets no application from them
                grants[user] = mine
        if reason is not None:
            out.unexpressed.append(Unexpressed(f"ACL {acl.text()}", reason))
    for user, mechanisms in live.scram_users.items():
        if user in own:
            continue
        grants.setdefault(user, _Grants())
        other = [m for m in mechanisms if m != "SCRAM-SHA-512"]
        if other:
            out.unexpressed.append(
                Unexpressed(
                    f"SCRAM credential {', '.join(other)} of user {user!r}",
                    "the product declares SCRAM-SHA-512 credentials only",
                )
            )
    quotas: dict[str, Quota] = {}
    for quota in sorted(live.quotas, key=lambda q: q.text()):
        entity = quota.entity
        if set(entity) != {"user"}:
            out.unexpressed.append(
                Unexpressed(
                    f"quota on {quota.text()}",
                    "a stack declares quotas per user (and the default user) only, not per client id or IP",
                )
            )
            continue
        who = entity["user"]
        if who is not None and who in own:
            out.unexpressed.append(Unexpressed(f"quota on {quota.text()}", own[who]))
            continue
        declared = _quota_of(quota, out.unexpressed)
        if declared is None:
            continue
        if who is None:
            out.default_quota = declared
        else:
            grants.setdefault(who, _Grants())
            quotas[who] = declared
    for user in sorted(grants):
        g = grants[user]
        out.applications.append(
            Application(
                name=user,
                produces=sorted(set(g.produces)),
                consumes=sorted(set(g.consumes)),
                produces_prefix=g.produces_prefix,
                consumes_prefix=g.consumes_prefix,
                consumer_group=g.group,
                quota=quotas.get(user),
            )
        )
    out.unexpressed.sort()
    return out


def _rule_message(exc: ConfigError) -> str:
    return " ".join(exc.problem.split())


def adopted_topology(base: Topology, adoption: Adoption) -> tuple[Topology, Adoption]:
    """``base`` (the stack file as written: its clusters, links, admin and replicator) declaring the adopted
    topics, applications and default quota instead of its own, validated by the product's rules.

    An application of ``base`` with the same name keeps its password. A topic or an application a rule
    refuses is left out and added to the returned adoption's ``unexpressed`` with the rule's message; the
    notes name each application whose password the team must set before the first ``pulumi up``."""
    result = Adoption(
        default_quota=adoption.default_quota, unexpressed=list(adoption.unexpressed), notes=list(adoption.notes)
    )
    passwords = {app.name: app.password for app in base.principals.applications}
    empty = base.principals.model_copy(update={"applications": [], "default_quota": None})
    bare = base.revised(topics=[], principals=empty)
    for topic in adoption.topics:
        try:
            bare.revised(topics=[topic])
        except ConfigError as exc:
            result.unexpressed.append(
                Unexpressed(f"topic {topic.name!r}", f"refused by the stack's rules: {_rule_message(exc)}")
            )
            continue
        result.topics.append(topic)
    with_topics = bare.revised(topics=result.topics)
    for app in adoption.applications:
        app = app.model_copy(update={"password": passwords.get(app.name)})
        try:
            with_topics.revised(principals=empty.model_copy(update={"applications": [app]}))
        except ConfigError as exc:
            result.unexpressed.append(
                Unexpressed(f"application {app.name!r}", f"refused by the stack's rules: {_rule_message(exc)}")
            )
            continue
        result.applications.append(app)
    principals = empty.model_copy(update={"applications": result.applications, "default_quota": result.default_quota})
    try:
        topology = with_topics.revised(principals=principals)
    except ConfigError as exc:
        raise ConfigError(
            f"the adopted applications, each valid alone, break a rule together: {_rule_message(exc)}",
            "adopt anyway by fixing the ACLs on the cluster (or edit the proposal by hand); nothing was written",
        ) from None
    for i, app in enumerate(result.applications):
        if app.password is None:
            result.notes.append(
                f"application {app.name!r}: set its current password before the first `pulumi up` "
                f"(`pulumi config set --path --secret 'kafka-dr:principals.applications[{i}].password' -- <password>`); "
                "Kafka keeps only a salted hash, and without it the program generates a new password and "
                "replaces the user's credential"
            )
    result.unexpressed.sort()
    return topology, result
