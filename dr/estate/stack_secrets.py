"""The stack's secrets, decrypted the way ``pulumi`` decrypts them, for every ``drctl`` command.

A stack file holds passwords as ``secure: v1:...`` ciphertext (``pulumi config set --path
--secret``). ``drctl`` never decrypts them itself: it asks the Pulumi CLI, through the Automation
API, for the stack's config with ``--show-secrets`` — so the stack's own secrets provider and
backend apply (``$PULUMI_BACKEND_URL`` or the project's ``backend.url``; the passphrase from
``PULUMI_CONFIG_PASSPHRASE[_FILE]``), exactly as for ``pulumi up``. The plaintext stays in this
process's memory; nothing here logs or returns it in a message.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dr.base.errors import AuthError
from dr.topology import Topology, load_topology

__all__ = [
    "StackSecrets",
    "reveal_admin",
    "reveal_application",
    "reveal_connect",
    "reveal_oauth_secret",
    "reveal_tls_key",
    "stack_secrets",
]


@dataclass(frozen=True)
class StackSecrets:
    """Decrypted passwords of one stack, by what they belong to (``repr`` shows no value)."""

    stack: str
    admin: dict[str, str] = field(default_factory=dict, repr=False)
    applications: dict[str, str] = field(default_factory=dict, repr=False)
    connect: dict[str, str] = field(default_factory=dict, repr=False)
    tls_keys: dict[str, str] = field(default_factory=dict, repr=False)
    """Each cluster's ``tls.client_key_pem``, by cluster name."""
    oauth: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    """Each OAUTHBEARER client secret, by (cluster name, ``admin`` | ``replicator`` | ``applications.<name>``)."""


_cache: dict[tuple[str, str], StackSecrets] = {}
_lock = threading.Lock()


def _needs_decryption(topology: Topology) -> bool:
    return any(getattr(secret, "is_encrypted", False) for _path, _key, secret in topology.secret_fields())


def stack_secrets(topology: Topology) -> StackSecrets:
    """The decrypted secrets of ``topology``'s stack (one Pulumi call per process and stack file).

    Raises :class:`~dr.errors.AuthError` (exit 5) when the stack's backend or passphrase cannot
    decrypt them, naming what to set."""
    from dr.base.stackref import StackRef
    from dr.estate.stack import EstateStack

    if not _needs_decryption(topology):
        return _collect(topology)
    es = EstateStack(StackRef.resolve(topology.name))
    key = (str(es.stack_file.resolve()), str(es.stack_file.stat().st_mtime_ns))
    with _lock:
        if key not in _cache:
            config = es.config()
            _cache[key] = _collect(load_topology(topology.name, config))
        return _cache[key]


def _collect(plain: Topology) -> StackSecrets:
    def value(secret: object) -> str | None:
        if secret is None or getattr(secret, "is_encrypted", False):
            return None
        return secret.get_secret_value()  # type: ignore[attr-defined, no-any-return]

    found = StackSecrets(plain.name)
    for c in plain.clusters:
        if (v := value(c.admin_password)) is not None:
            found.admin[c.name] = v
        if c.tls is not None and (v := value(c.tls.client_key_pem)) is not None:
            found.tls_keys[c.name] = v
        for who, client in c.oauth_clients():
            if (v := value(client.client_secret)) is not None:
                found.oauth[(c.name, who)] = v
    for app in plain.principals.applications:
        if (v := value(app.password)) is not None:
            found.applications[app.name] = v
    for cc in plain.connect_clusters:
        if (v := value(cc.password)) is not None:
            found.connect[cc.name] = v
    return found


def _missing(stack: str, what: str, path: str) -> AuthError:
    return AuthError(
        f"stack {stack!r}: {what} is not set.",
        f"set it as a secret: `pulumi config set --stack {stack} --path --secret '{path}' <password>`",
    )


def reveal_admin(topology: Topology, cluster: str) -> str:
    """The admin password of an external ``cluster``, decrypted (AuthError when none is declared)."""
    index = next(i for i, c in enumerate(topology.clusters) if c.name == cluster)
    found = stack_secrets(topology).admin.get(cluster)
    if found is None:
        raise _missing(
            topology.name, f"the admin password of cluster {cluster!r}", f"kafka-dr:clusters[{index}].adminPassword"
        )
    return found


def reveal_tls_key(topology: Topology, cluster: str) -> str | None:
    """An external ``cluster``'s declared ``tls.client_key_pem``, decrypted; None when it declares none."""
    tls = topology.cluster(cluster).tls
    if tls is None or tls.client_key_pem is None:
        return None
    if not tls.client_key_pem.is_encrypted:
        return tls.client_key_pem.get_secret_value()
    return stack_secrets(topology).tls_keys.get(cluster)


def reveal_application(topology: Topology, app: str) -> str | None:
    """An application's declared password, decrypted; None when the stack declares none (generated)."""
    declared = topology.principals.application(app).password
    if declared is None:
        return None
    if not getattr(declared, "is_encrypted", False):
        return declared.get_secret_value()
    return stack_secrets(topology).applications.get(app)


def reveal_connect(topology: Topology, name: str) -> str | None:
    """An external Connect cluster's REST password, decrypted; None when it declares none."""
    declared = topology.connect_cluster(name).password
    if declared is None:
        return None
    if not getattr(declared, "is_encrypted", False):
        return declared.get_secret_value()
    return stack_secrets(topology).connect.get(name)


def reveal_oauth_secret(topology: Topology, cluster: str, who: str) -> str:
    """The client secret of OAUTHBEARER identity ``who`` (``admin``, ``replicator`` or ``applications.<name>``)
    of ``cluster``, decrypted (AuthError naming the stack path when none is declared)."""
    index = next(i for i, c in enumerate(topology.clusters) if c.name == cluster)
    found = stack_secrets(topology).oauth.get((cluster, who))
    if found is None:
        path = f"kafka-dr:clusters[{index}].oauth.{who}.clientSecret"
        raise _missing(topology.name, f"the client secret of {who!r} on cluster {cluster!r}", path)
    return found
