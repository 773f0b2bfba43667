"""Client configuration of every application, for the cluster where its grants are.

Written by ``drctl estate up`` for every application — the active cluster's, each edge's own on its
edge, each active-active peer's on its home (:func:`dr.topology.access.client_cluster`) — and by every
failover's ``clients`` step right after the move (promotion, region or edge loss, rejoin): applications
that reload their settings from these files follow the failover by themselves.

For each application principal two files are written under ``<state>/clients/`` (directory 0700,
files 0600, written atomically):

* ``<app>.properties`` — Java clients (``sasl.jaas.config`` carries the credentials);
* ``<app>.json`` — librdkafka / confluent-kafka settings.

A consumer on a cluster that holds a link's copies (passive, promoted) reads committed records
(``isolation.level=read_committed``): an exactly-once link writes in transactions.

Both hold the password, so they are never printed; the failover summary names only the paths.

On an OAUTHBEARER cluster both carry the application's own client id (``oauth.applications.<app>``) and the
identity provider, never its client secret: the team adds ``sasl.oauthbearer.client.secret`` to the
librdkafka file (a key the product does not own, kept on every rewrite) and writes ``clientSecret=...`` to
the 0600 ``<app>.oauth-secret.properties`` the Java file's JAAS options resolve through Kafka's
``FileConfigProvider``; the JVM lists the token endpoint in ``org.apache.kafka.sasl.oauthbearer.allowed.urls``.

Over TLS both carry the cluster's CA bundle (a path) and hostname verification; under mutual TLS
(``SSL``) they name where the application's own certificate and key go: librdkafka reads
``<state>/clients/<app>.crt`` and the unencrypted ``<app>.key``; Java reads the PKCS#12 keystore
``<app>.p12``, whose password it resolves through Kafka's ``FileConfigProvider`` from the line
``password=...`` of ``<app>.p12.password`` (a Java client cannot read a PEM keystore file without
``ssl.key.password``, so the file names where the password is instead of holding it). The application
team writes those files; the product never holds an application's private key or its password. A rewrite (a failover) keeps every key of the
old file that the product does not write (a team's own ``ssl.*`` or tuning settings).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dr.base.files import private_dir
from dr.base.java_properties import properties_text
from dr.estate.estate import Estate
from dr.kafka.client import Endpoint
from dr.kafka.oauth import secret_reference
from dr.kafka.tls import TlsFiles
from dr.topology import Application, Kind, Topology
from dr.topology.access import client_cluster
from dr.topology.oauth_login import oauth_client, oauth_settings, uses_oauth
from dr.topology.transport import application_tls_files

__all__ = ["client_files", "oauth_secret_file", "publish_clients"]


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def client_files(state: Path, app: str) -> tuple[Path, Path]:
    """Paths of an application's ``.properties`` and ``.json`` client configuration."""
    d = Path(state) / "clients"
    return d / f"{app}.properties", d / f"{app}.json"


#: Keys the product always owns in a client file, whatever the cluster's protocol: on a rewrite a key of
#: the old file among these, or among the keys written this time, is replaced or dropped; any other key
#: (a team's tuning, its own keystore under SASL_SSL) is the team's and is kept.
OWNED_KEYS = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "ssl.endpoint.identification.algorithm",
        "ssl.ca.location",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "group.id",
        "client.id",
        "isolation.level",
        "sasl.login.callback.handler.class",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.scope",
        "https.ca.location",
        "config.providers",
        "config.providers.kdroauth.class",
    }
)


def _properties_key(line: str) -> str:
    key, escaped = [], False
    for ch in line.lstrip():
        if escaped:
            key.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "=: \t\f":
            break
        else:
            key.append(ch)
    return "".join(key)


def _kept_properties(path: Path, written: frozenset[str] = frozenset()) -> list[str]:
    """The lines of an existing properties file that set keys the product does not own (comments and
    the product's keys dropped; a continued value kept whole)."""
    if not path.is_file():
        return []
    kept: list[str] = []
    keep = False
    continued = False
    for line in path.read_text(encoding="latin-1").splitlines():
        if not continued:
            stripped = line.lstrip()
            key = _properties_key(line)
            keep = bool(stripped) and stripped[0] not in "#!" and key not in OWNED_KEYS and key not in written
        if keep:
            kept.append(line)
        continued = (len(line) - len(line.rstrip("\\"))) % 2 == 1
    return kept


def _kept_json(path: Path, written: frozenset[str] = frozenset()) -> dict[str, Any]:
    try:
        old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(old, dict):
        return {}
    return {k: v for k, v in old.items() if k not in OWNED_KEYS and k not in written}


def _app_tls(estate: Estate, cluster: str, app: str) -> TlsFiles | None:
    """The application's TLS files: the cluster's CA, and under mutual TLS where its own certificate goes."""
    return application_tls_files(estate.topology.cluster(cluster), Path(estate.state), app)


def reads_copies(topology: Topology, cluster: str) -> bool:
    """True when ``cluster`` holds records a link wrote — it receives a link (a passive cluster, an
    active-active peer, a hub) or was promoted by a failover: an exactly-once link writes them in
    transactions, so its consumers read committed records only (never an aborted copy)."""
    return bool(topology.links_into(cluster)) or topology.failover_done


def _configs(
    endpoint: Endpoint,
    app: Application,
    cluster: str,
    read_committed: bool = False,
    java_extra: dict[str, str] | None = None,
) -> tuple[str, dict[str, Any]]:
    java = {**endpoint.java_config(), **(java_extra or {})}
    librdkafka: dict[str, Any] = dict(endpoint.config())
    if app.consumer_group:
        java["group.id"] = librdkafka["group.id"] = app.consumer_group
    if read_committed and (app.consumes or app.consumes_prefix or app.consumer_group):
        java["isolation.level"] = librdkafka["isolation.level"] = "read_committed"
    java["client.id"] = librdkafka["client.id"] = app.name
    secret = "no secret: see its client-secret file" if endpoint.uses_oauth else "contains a password"
    header = f"{app.name} on cluster {cluster} (written by drctl; {secret})"
    return properties_text({k: str(v) for k, v in java.items()}, header), librdkafka


def publish_clients(estate: Estate, cluster: str | None = None, apps: list[str] | None = None) -> list[dict[str, str]]:
    """Write each application's client configuration for the cluster its grants are on
    (:func:`~dr.topology.access.client_cluster` of ``estate``'s topology: edges' applications on their
    edge, active-active ones on their home peer); return what was written (no secrets).

    Every application by default; only those ``apps``, and only those whose cluster is ``cluster``, when
    given (a failover step publishing one cluster's moved applications)."""
    private_dir(Path(estate.state) / "clients")
    written = []
    for app in estate.topology.principals.applications:
        name = client_cluster(estate.topology, app)
        if (apps is not None and app.name not in apps) or (cluster is not None and name != cluster):
            continue
        written.append(_publish(estate, app, name))
    return written


def _publish(estate: Estate, app: Application, cluster: str) -> dict[str, str]:
    c = estate.topology.cluster(cluster)
    # the stack's secret (decrypted as `pulumi` does) or the password the stack generated
    password = estate.app_password(app.name)
    if uses_oauth(c):
        return _publish_oauth(estate, app, cluster)
    if c.kind is Kind.LOCAL:
        # the local cluster's protocol and CA (local_tls), as the application
        endpoint = estate.local_cluster(cluster).endpoint().with_user(app.name, password)
    else:
        endpoint = Endpoint(
            c.bootstrap_servers or "",
            app.name,
            password,
            c.security_protocol,
            c.sasl_mechanism,
            _app_tls(estate, cluster, app.name),
        )
    props, conf = _configs(endpoint, app, cluster, reads_copies(estate.topology, cluster))
    return _write(estate, app, cluster, endpoint.bootstrap, props, conf, "included")


def _write(
    estate: Estate, app: Application, cluster: str, bootstrap: str, props: str, conf: dict[str, Any], secret: str
) -> dict[str, str]:
    props_path, json_path = client_files(estate.state, app.name)
    kept = _kept_properties(props_path, frozenset(_properties_keys(props)))
    _write_private(props_path, props + "".join(f"{line}\n" for line in kept))
    _write_private(json_path, json.dumps({**_kept_json(json_path, frozenset(conf)), **conf}, indent=2) + "\n")
    return {
        "application": app.name,
        "cluster": cluster,
        "bootstrap": bootstrap,
        "properties": str(props_path),
        "json": str(json_path),
        "password": secret,
    }


def _properties_keys(text: str) -> list[str]:
    return [_properties_key(line) for line in text.splitlines() if line.strip() and line.lstrip()[0] not in "#!"]


def oauth_secret_file(state: Path, app: str) -> Path:
    """Where an application team writes its OAUTHBEARER client secret for the Java client file (a 0600
    properties file with the line ``clientSecret=...``); the product never writes it."""
    return Path(state) / "clients" / f"{app}.oauth-secret.properties"


def _publish_oauth(estate: Estate, app: Application, cluster: str) -> dict[str, str]:
    """An OAUTHBEARER cluster's client files of ``app``: its own client id and the identity provider, never its
    client secret — the Java file resolves it from :func:`oauth_secret_file` (Kafka's ``FileConfigProvider``),
    and the team adds ``sasl.oauthbearer.client.secret`` to the librdkafka file (kept on every rewrite)."""
    c = estate.topology.cluster(cluster)
    reference, provider = secret_reference(str(oauth_secret_file(estate.state, app.name)))
    endpoint = Endpoint(
        c.bootstrap_servers or "",
        oauth_client(c, app.name).client_id,
        reference,
        c.security_protocol,
        c.sasl_mechanism,
        _app_tls(estate, cluster, app.name),
        cluster,
        oauth_settings(c, Path(estate.state)),
    )
    props, conf = _configs(endpoint, app, cluster, reads_copies(estate.topology, cluster), provider)
    conf.pop("sasl.oauthbearer.client.secret")
    return _write(estate, app, cluster, endpoint.bootstrap, props, conf, "provided by the application team")
