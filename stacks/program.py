"""The estate as one Pulumi program: read and validate the topology, build the components, export.

:func:`run` is both the body of ``stacks/__main__.py`` (``pulumi up`` from the repository root) and
the inline program ``drctl`` runs through the Automation API (:mod:`dr.estate.stack`), so there is one
way the estate is provisioned and changed.

What each role gets:

* active, passive — the cluster, its users/topics/ACLs (:class:`~stacks.access.ClusterAccess`);
* decommissioned  — only the cluster (its data is kept for recovery; not started again);
* standby         — nothing yet: it is declared, and provisioned when a failover makes it passive.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pulumi
from pydantic.alias_generators import to_camel

from dr.base.errors import ConfigError, DRError
from dr.base.stackref import state_dir as default_state_dir
from dr.kafka.tls import uses_sasl
from dr.runtime.credentials import ADMIN_USER, BROKER_USER, Credentials
from dr.topology import NAMESPACE, Cluster, Kind, Role, Topology, load_topology
from dr.topology.access import CONNECT_USER, client_cluster
from dr.topology.insecure import insecure_warnings
from dr.topology.provisioning import provisioning_warning
from dr.topology.stackconfig import CONFIG_KEYS, StackConfig
from stacks.access import ClusterAccess, ClusterAccessArgs
from stacks.cluster import KafkaCluster, KafkaClusterArgs
from stacks.kept_passwords import generated_users, keep_generated, previous_outputs, replicator_password_used
from stacks.links import LinkArgs, link_component
from stacks.links.connect import check_workers
from stacks.tls_preflight import refuse_failing_handshakes

if TYPE_CHECKING:
    from stacks.confluent import ConfluentKafkaCluster
    from stacks.connect import LocalConnectWorkers

__all__ = ["build", "load", "run"]


def load() -> Topology:
    """The validated topology of the running stack, from the engine's (decrypted) config.

    A broken rule stops the program before any resource is registered, with the message ``drctl``
    prints for the same stack file.
    """
    config: StackConfig = {}
    for key in CONFIG_KEYS:
        value = pulumi.runtime.get_config(key)
        if value is not None:
            config[key] = value
    try:
        topology = load_topology(pulumi.get_stack(), config)
        _refuse_plaintext_secrets(topology)
    except DRError as exc:
        raise pulumi.RunError(f"error: {exc}") from None
    for line in insecure_warnings(topology):  # on every run, as drctl says them on every command
        pulumi.log.warn(line)
    return topology


def _refuse_plaintext_secrets(topology: Topology) -> None:
    """A password written in plain text in the stack file is refused here as by every ``drctl``
    command: the engine marks a config key secret when any value inside it is ``secure:``."""

    plain = [
        path
        for path, key, _secret in topology.secret_fields()
        if not pulumi.runtime.is_config_secret(f"{NAMESPACE}:{to_camel(key)}")
    ]
    if plain:
        raise ConfigError(
            f"stack '{topology.name}' holds passwords in plain text: {', '.join(plain)}",
            f"store each as a secret: `pulumi config set --stack {topology.name} --path --secret "
            f"'{NAMESPACE}:{plain[0].replace('_password', 'Password').replace('api_secret', 'apiSecret')}' <value>`",
        )


def _declared(secret: Any) -> str | None:
    """A secret the engine decrypted; None when not declared."""
    return secret.get_secret_value() if secret is not None and not secret.is_encrypted else None


def _passwords(topology: Topology, credentials: Any) -> dict[str, pulumi.Output[str]]:
    replicator = topology.principals.replicator
    out: dict[str, pulumi.Output[str]] = {}
    declared = _declared(topology.principals.replicator_password)
    if declared is not None or replicator_password_used(topology):  # OAUTHBEARER only: its client secret instead
        out[replicator] = pulumi.Output.secret(declared or credentials.password(replicator))
    if any(cc.is_local for cc in topology.connect_clusters):
        out[CONNECT_USER] = pulumi.Output.secret(credentials.password(CONNECT_USER))
    for app in topology.principals.applications:
        declared = app.password
        value = (
            declared.get_secret_value()
            if declared is not None and not declared.is_encrypted
            else credentials.password(app.name)
        )
        out[app.name] = pulumi.Output.secret(value)
    return out


def _admin(cluster: Any, credentials: Any) -> tuple[str, str]:
    if cluster.is_local:
        return ADMIN_USER, credentials.password(ADMIN_USER)
    from dr.topology.external import external_endpoint

    ep = external_endpoint(cluster, state=Path(credentials.path).parent)
    return ep.username, ep.password


def _existing_topics(topology: Topology, cluster: Cluster, credentials: Any) -> dict[str, Any]:
    """Per-resource mode on an external cluster: the declared topics it already holds, to import."""
    if cluster.kind is not Kind.EXTERNAL or topology.provisioning != "individual":
        return {}
    from dr.topology.external import external_endpoint
    from dr.topology.topics import topics_on
    from stacks.existing_topics import existing_topics

    try:
        endpoint = external_endpoint(cluster, state=Path(credentials.path).parent)
    except DRError as exc:  # the provider of the cluster reports it with its own words
        pulumi.log.warn(f"cluster {cluster.name}: existing topics not read ({exc.problem}); none is imported")
        return {}
    return existing_topics(cluster.name, endpoint, [t.name for t in topics_on(topology, cluster)])


def build(topology: Topology, state_dir: Path) -> dict[str, Any]:
    """Register every resource of ``topology``; return what the stack exports."""

    too_large = provisioning_warning(topology)
    if too_large is not None:  # said before any resource is registered (`pulumi preview` shows it)
        pulumi.log.warn(too_large)
    credentials = Credentials(state_dir)
    if any(c.is_local for c in topology.clusters):
        for user in (ADMIN_USER, BROKER_USER):  # generated here, once, not by the clusters' providers
            credentials.password(user)
    passwords = _passwords(topology, credentials)
    check_workers(topology, _declared)
    clusters: dict[str, KafkaCluster | ConfluentKafkaCluster] = {}
    access: dict[str, ClusterAccess] = {}
    for c in topology.clusters:
        if c.role is Role.STANDBY or (c.role is Role.DECOMMISSIONED and c.kind is Kind.EXTERNAL):
            continue
        if c.kind is Kind.CONFLUENT_CLOUD:
            from stacks.confluent import confluent_cluster

            clusters[c.name] = confluent_cluster(c)
        else:
            user, password = _admin(c, credentials)
            clusters[c.name] = KafkaCluster(
                c.name,
                KafkaClusterArgs(
                    cluster=c,
                    state_dir=state_dir,
                    admin_username=user,
                    admin_password=pulumi.Output.secret(password),
                    endpoint=topology.endpoint,
                    lease_fence=topology.failover_policy.broker_fence,
                ),
            )
        if c.role is not Role.DECOMMISSIONED:
            existing = _existing_topics(topology, c, credentials)
            access[c.name] = ClusterAccess(
                f"{c.name}-access",
                ClusterAccessArgs(
                    topology=topology,
                    cluster=c,
                    provider=clusters[c.name].provider,
                    passwords=passwords,
                    connection=getattr(clusters[c.name], "connection", None),
                    deleted_with=getattr(clusters[c.name], "local", None),
                    existing_topics=existing,
                    **_confluent_access(topology, c),
                ),
            )
    workers = _connect_workers(topology, state_dir, access)
    links: dict[str, pulumi.Resource] = {}
    for link in topology.links:
        args = LinkArgs(
            topology=topology,
            link=link,
            state_dir=state_dir,
            credentials=credentials,
            clusters=clusters,
            access=access,
            workers=workers,
        )
        component = link_component(args)
        if component is not None:
            links[link.name] = component
    out = {**_outputs(topology, clusters, passwords, state_dir), "credentials": _generated(topology, credentials)}
    proxy = _endpoint_proxy(topology, state_dir, clusters)
    if proxy is not None:  # only then: the outputs of stacks without an endpoint stay as they were
        out["endpoint"] = topology.endpoint.bootstrap if topology.endpoint is not None else None
    if topology.provisioning == "batched":  # only then: the outputs of existing stacks stay as they were
        out["provisioning"] = topology.provisioning
        out["batched_sets"] = list(BATCHED_SETS)
    return out


def _endpoint_proxy(
    topology: Topology, state_dir: Path, clusters: Mapping[str, KafkaCluster | ConfluentKafkaCluster]
) -> Any:
    """The client endpoint's HAProxy of a local estate, pointing at the active cluster, started after
    the local clusters (None without an endpoint or for external clusters, whose proxy the platform runs)."""
    from dr.topology.client_endpoint import endpoint_spec

    spec = endpoint_spec(topology)
    if spec is None or not spec.backends or topology.endpoint is None or topology.endpoint.runtime_api is not None:
        return None
    from stacks.endpoint_proxy import EndpointProxy, endpoint_proxy_args

    local = [getattr(c, "local", None) for c in clusters.values()]
    return EndpointProxy(
        "client-endpoint",
        endpoint_proxy_args(spec, topology.active().name, state_dir),
        pulumi.ResourceOptions(depends_on=[r for r in local if r is not None]),
    )


BATCHED_SETS = ("topics", "acls", "users")
"""What ``provisioning: batched`` makes one resource per cluster (the ``batched_sets`` output)."""


def _refuse_switch_to_batched(topology: Topology) -> None:
    """A bare ``pulumi up`` of a stack deployed with individual provisioning (or batched before its SCRAM
    users were a set) and now declaring ``batched`` would delete the old Acl and user resources *after*
    the new sets created the same bindings and users — and so the bindings and the users. ``drctl estate
    up`` forgets those resources from the state first (one edit, nothing on the clusters changes); the
    bare CLI cannot, so it stops here."""
    if topology.provisioning != "batched":
        return
    previous = previous_outputs(topology.name)
    if not previous.get("clusters"):
        return
    # a stack deployed batched before its users were a set has no batched_sets: topics and ACLs
    had = (
        set(previous.get("batched_sets") or ("topics", "acls")) if previous.get("provisioning") == "batched" else set()
    )
    items = [kind for kind in BATCHED_SETS if kind not in had]
    if items:
        what = {"topics": "topics", "acls": "ACLs", "users": "SCRAM users"}
        named = " and ".join(what[k] for k in items)
        raise ConfigError(
            f"stack {topology.name!r} was deployed with individual {named} and now declares them batched "
            "(`kafka-dr:provisioning: batched`); a bare `pulumi up` would delete the old resources after the new "
            "sets created the same ACLs and users, so nothing was changed",
            f"switch once with `drctl estate up --stack {topology.name}` (it forgets the per-item resources from "
            "the state in one edit, leaving them on the clusters, and the sets adopt them); plain `pulumi up` "
            "works again after that",
        )


def _generated(topology: Topology, credentials: Any) -> pulumi.Output[Any]:
    """The passwords this stack generated for its principals, as one secret output: a fresh clone with
    the same backend and passphrase reads them back (:mod:`stacks.kept_passwords`, and ``drctl``'s
    :meth:`dr.estate.stack.EstateStack.restore_credentials`) instead of generating new ones that the
    clusters would not know."""
    return pulumi.Output.secret({user: credentials.password(user) for user in generated_users(topology)})


def _connect_workers(
    topology: Topology, state_dir: Path, access: dict[str, ClusterAccess]
) -> dict[str, LocalConnectWorkers]:
    """The local Connect clusters' workers, started once their principal and ACLs exist on the home cluster."""
    from stacks.connect import LocalConnectWorkers, LocalConnectWorkersArgs, workers_props

    return {
        cc.name: LocalConnectWorkers(
            f"{cc.name}-connect",
            LocalConnectWorkersArgs(**workers_props(topology, cc, state_dir)),
            pulumi.ResourceOptions(depends_on=[access[cc.cluster]] if cc.cluster in access else []),
        )
        for cc in topology.connect_clusters
        if cc.is_local
    }


class _ConfluentAccess(TypedDict, total=False):
    """What :class:`ClusterAccessArgs` is given besides its defaults for a Confluent Cloud cluster."""

    scram_users: bool
    skip_topics: frozenset[str]


def _confluent_access(topology: Topology, cluster: Cluster) -> _ConfluentAccess:
    """Confluent Cloud clusters have no SCRAM users, and their mirror topics belong to the link; OAUTHBEARER
    clusters have no SCRAM users either (the identity provider holds every client)."""
    if cluster.sasl_mechanism == "OAUTHBEARER" and not cluster.is_local:
        return {"scram_users": False}
    if cluster.kind is not Kind.CONFLUENT_CLOUD:
        return {}
    from stacks.confluent import mirrored_topics

    return {"scram_users": False, "skip_topics": frozenset(mirrored_topics(topology, cluster.name))}


def _client_tls(home: Any, state_dir: Path, app: str) -> dict[str, str]:
    """The TLS settings an application's client needs for ``home``, as its published files carry them: the
    CA as a path, and under mutual TLS where the application's own certificate, key and keystore go (paths;
    the keystore's password through a config provider) — never a key or a password."""
    from dr.kafka.tls import TlsFiles, java_tls, librdkafka_tls
    from dr.runtime.local_tls import local_tls_files
    from dr.topology.transport import application_tls_files

    if home.is_local and home.local_tls:
        files = local_tls_files(state_dir)
        files = TlsFiles(ca_location=files.ca_location, hostname_verification=files.hostname_verification)
    else:
        files = application_tls_files(home, state_dir, app)
    if files is None:
        return {}
    # librdkafka's own keys for the file paths; its hostname-check value differs from Java's, which is kept
    paths = {k: v for k, v in librdkafka_tls(home.client_protocol, files).items() if k.endswith(".location")}
    return {**java_tls(home.client_protocol, files), **paths}


def _oauth_login(home: Cluster, state_dir: Path, app: str) -> dict[str, str]:
    """An application's OAUTHBEARER login as its published file carries it: everything but its client secret."""
    from dr.kafka.oauth import published_oauth
    from dr.topology.oauth_login import oauth_client, oauth_settings

    return published_oauth(oauth_settings(home, state_dir), oauth_client(home, app).client_id)


def _outputs(
    topology: Topology,
    clusters: Mapping[str, KafkaCluster | ConfluentKafkaCluster],
    passwords: dict[str, pulumi.Output[str]],
    state_dir: Path,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "clusters": {
            name: {"role": topology.cluster(name).role.value, "bootstrapServers": k.bootstrap_servers}
            for name, k in clusters.items()
        },
        "links": [
            {"name": lk.name, "source": lk.source, "target": lk.target, "engine": lk.engine.value}
            for lk in topology.links
        ],
    }
    configs: dict[str, Any] = {}
    for app in topology.principals.applications:
        # where its grants are (its home peer, its edge, the active): the cluster its published file names
        home = topology.cluster(client_cluster(topology, app))
        if home.name not in clusters or home.kind is Kind.CONFLUENT_CLOUD:
            continue
        login = (
            _oauth_login(home, state_dir, app.name)
            if uses_sasl(home.client_protocol) and home.sasl_mechanism == "OAUTHBEARER" and not home.is_local
            else {
                "sasl.mechanism": "SCRAM-SHA-512" if home.is_local else home.sasl_mechanism,
                "sasl.username": app.name,
                "sasl.password": passwords[app.name],
            }
            if uses_sasl(home.client_protocol)
            else {}  # mutual TLS: the application's certificate is its login
        )
        configs[app.name] = {
            "bootstrap.servers": clusters[home.name].bootstrap_servers,
            "security.protocol": home.client_protocol,
            **login,
            **_client_tls(home, state_dir, app.name),
        }
    if configs:
        out["clientConfigs"] = pulumi.Output.secret(configs)
    return out


def run(state_dir: Path | None = None) -> None:
    """The program: load the topology, build the estate, export outputs.

    ``state_dir`` is where local clusters keep their data and generated credentials (default:
    ``$KDR_STATE_DIR/<stack>``, else ``.state/<stack>`` of the project). An external TLS cluster whose
    handshake fails stops the run before any resource is declared (:mod:`stacks.tls_preflight`).
    """

    topology = load()
    state = state_dir or default_state_dir(topology.name)
    try:  # before any resource is declared: a wrong CA stops the run with nothing changed
        refuse_failing_handshakes(topology, state)
    except DRError as exc:
        raise pulumi.RunError(f"error: {exc}") from None
    if state_dir is None:  # `pulumi up` itself (drctl restores them before it runs the program inline)
        try:
            _refuse_switch_to_batched(topology)
            kept = keep_generated(topology, Credentials(state))
        except DRError as exc:
            raise pulumi.RunError(f"error: {exc}") from None
        if kept:
            pulumi.log.info(f"kept the passwords this stack generated for {', '.join(kept)} (its `credentials` output)")
    for key, value in build(topology, state).items():
        pulumi.export(key, value)
