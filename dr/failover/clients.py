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
from dr.topology import Application, Kind, Topology
from dr.topology.access import client_cluster

__all__ = ["client_files", "publish_clients"]


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


def reads_copies(topology: Topology, cluster: str) -> bool:
    """True when ``cluster`` holds records a link wrote — it receives a link (a passive cluster, an
    active-active peer, a hub) or was promoted by a failover: an exactly-once link writes them in
    transactions, so its consumers read committed records only (never an aborted copy)."""
    return bool(topology.links_into(cluster)) or topology.failover_done


def _configs(
    endpoint: Endpoint, app: Application, cluster: str, read_committed: bool = False
) -> tuple[str, dict[str, Any]]:
    java = dict(endpoint.java_config())
    librdkafka: dict[str, Any] = dict(endpoint.config())
    if app.consumer_group:
        java["group.id"] = librdkafka["group.id"] = app.consumer_group
    if read_committed and (app.consumes or app.consumes_prefix or app.consumer_group):
        java["isolation.level"] = librdkafka["isolation.level"] = "read_committed"
    java["client.id"] = librdkafka["client.id"] = app.name
    header = f"{app.name} on cluster {cluster} (written by drctl; contains a password)"
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
    if c.kind is Kind.LOCAL:
        endpoint = Endpoint(estate.local_cluster(cluster).bootstrap, app.name, password)
    else:
        endpoint = Endpoint(c.bootstrap_servers or "", app.name, password, c.security_protocol, c.sasl_mechanism)
    props, conf = _configs(endpoint, app, cluster, reads_copies(estate.topology, cluster))
    props_path, json_path = client_files(estate.state, app.name)
    _write_private(props_path, props)
    _write_private(json_path, json.dumps(conf, indent=2) + "\n")
    return {
        "application": app.name,
        "cluster": cluster,
        "bootstrap": endpoint.bootstrap,
        "properties": str(props_path),
        "json": str(json_path),
        "password": "included",
    }
