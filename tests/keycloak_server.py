"""Keycloak, a real identity provider that checks client secrets and can disable a client, for the OAUTHBEARER
refusal test (:mod:`tests.oidc_server`'s server accepts any client and disables none).

``kc.sh start-dev`` of the distribution ``scripts/setup.sh`` unpacked and built for development mode
(:func:`dr.base.toolchain.keycloak_home`), on the Java 21+ setup recorded for it (``.java-home``: Keycloak's process
only), with the environment setup built it with (``.dev.env``: in-memory H2, loopback, a small serial-GC JVM). Each
start runs in a home of its own in a temporary directory (``bin/kc.sh`` copied, the rest linked to the cache, which
it only reads), on 127.0.0.1 at a free port below 32768 (:mod:`tests.integration.ports`), in its own process group,
killed at the end with nothing left behind. The admin user's random password is in the environment of the process
only (``KC_BOOTSTRAP_ADMIN_PASSWORD``), never on a command line.

``with keycloak_server() as kc:`` yields a :class:`Keycloak` with realm :data:`REALM` and client scope
:data:`SCOPE` (an audience mapper puts ``kafka`` in the tokens' ``aud``); :meth:`Keycloak.add_client` registers a
confidential client (client-credentials grant), :meth:`Keycloak.set_enabled` disables or enables it. A token's
``sub`` is its service account's id: brokers take the principal from ``azp``, the client id.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dr.base.toolchain import keycloak_home

__all__ = ["PRINCIPAL_CLAIM", "REALM", "SCOPE", "Keycloak", "KeycloakUrls", "keycloak_server"]

REALM = "kafka"
SCOPE = "kafka"
"""The client scope every client gets by default; its audience mapper sets ``aud`` to it."""
PRINCIPAL_CLAIM = "azp"
"""The claim holding the client id in Keycloak's client-credentials tokens (``sub`` is a service account's id)."""


@dataclass(frozen=True)
class KeycloakUrls:
    """Realm :data:`REALM`'s endpoints at a Keycloak's base URL (known before it answers: a broker can be
    configured while it starts)."""

    url: str

    @property
    def issuer(self) -> str:
        """The ``iss`` of the realm's tokens."""
        return f"{self.url}/realms/{REALM}"

    @property
    def token_endpoint(self) -> str:
        """Where clients fetch tokens (client-credentials grant)."""
        return f"{self.issuer}/protocol/openid-connect/token"

    @property
    def jwks(self) -> str:
        """The JSON Web Key Set brokers validate tokens with."""
        return f"{self.issuer}/protocol/openid-connect/certs"


@dataclass(frozen=True)
class Keycloak(KeycloakUrls):
    """A running Keycloak: :class:`KeycloakUrls` and its admin API."""

    pid: int
    _admin_password: str = field(repr=False)
    _clients: dict[str, str] = field(default_factory=dict, repr=False)
    """client id → Keycloak's internal id"""

    def _admin_token(self) -> str:
        form = {"grant_type": "password", "client_id": "admin-cli", "username": "admin",
                "password": self._admin_password}  # fmt: skip
        return str(_call(f"{self.url}/realms/master/protocol/openid-connect/token", form=form)["access_token"])

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the admin REST API (``/admin/realms`` + ``path``) as the admin user."""
        return _call(f"{self.url}/admin/realms{path}", method, body, token=self._admin_token())

    def create_realm(self) -> None:
        """Realm :data:`REALM` with client scope :data:`SCOPE` (an audience mapper puts it in ``aud``)."""
        self.admin("POST", "", {"realm": REALM, "enabled": True})
        mapper = {
            "name": "kafka-audience", "protocol": "openid-connect", "protocolMapper": "oidc-audience-mapper",
            "config": {"included.custom.audience": SCOPE, "access.token.claim": "true", "id.token.claim": "false"},
        }  # fmt: skip
        self.admin("POST", f"/{REALM}/client-scopes", {"name": SCOPE, "protocol": "openid-connect",
                                                       "protocolMappers": [mapper]})  # fmt: skip
        scope_id = next(s["id"] for s in self.admin("GET", f"/{REALM}/client-scopes") if s["name"] == SCOPE)
        self.admin("PUT", f"/{REALM}/default-default-client-scopes/{scope_id}")

    def add_client(self, client_id: str, secret: str, token_lifespan_s: int = 300) -> None:
        """A confidential client with a service account (client-credentials grant only) and ``secret``; its access
        tokens live ``token_lifespan_s``."""
        self.admin("POST", f"/{REALM}/clients", {
            "clientId": client_id, "enabled": True, "publicClient": False, "serviceAccountsEnabled": True,
            "standardFlowEnabled": False, "directAccessGrantsEnabled": False,
            "clientAuthenticatorType": "client-secret", "secret": secret,
            "attributes": {"access.token.lifespan": str(token_lifespan_s)},
        })  # fmt: skip
        self._clients[client_id] = self.admin("GET", f"/{REALM}/clients?clientId={client_id}")[0]["id"]

    def set_enabled(self, client_id: str, enabled: bool) -> None:
        """Disable (or enable again) a client: a disabled one gets no token."""
        self.admin("PUT", f"/{REALM}/clients/{self._clients[client_id]}", {"enabled": enabled})

    def token(self, client_id: str, client_secret: str) -> dict[str, Any]:
        """A client-credentials token response, as a client asks for one (HTTPError when refused)."""
        form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret,
                "scope": SCOPE}  # fmt: skip
        return dict(_call(self.token_endpoint, form=form))


def _call(url: str, method: str | None = None, body: Any = None, form: dict[str, str] | None = None,
          token: str | None = None) -> Any:  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data, headers, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 — a loopback URL of ours
        text = response.read().decode()
    return json.loads(text) if text else None


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/realms/master", timeout=2) as response:  # noqa: S310 — loopback
            return bool(response.status == 200)
    except OSError:
        return False


def _environment(home: Path, port: int, admin_password: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KC_", "JAVA_OPTS", "QUARKUS_"))}
    for line in (home / ".dev.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value
    env.update(
        JAVA_HOME=(home / ".java-home").read_text().strip(),
        KC_HTTP_PORT=str(port),
        KC_BOOTSTRAP_ADMIN_USERNAME="admin",
        KC_BOOTSTRAP_ADMIN_PASSWORD=admin_password,
    )
    return env


@contextmanager
def keycloak_server(port: int | None = None) -> Iterator[Keycloak]:
    """Start Keycloak (see the module doc) with realm :data:`REALM`, yield it, kill it and its group after. On
    ``port`` when given (the caller reserved it), else on a free one."""
    from tests.integration.ports import free_window, release_window

    home = keycloak_home()
    reserved = port is None
    port = free_window(1) if port is None else port
    work = Path(tempfile.mkdtemp(prefix="kdr-keycloak-"))
    run = work / "home"
    (run / "bin").mkdir(parents=True)
    shutil.copy2(home / "bin" / "kc.sh", run / "bin" / "kc.sh")  # kc.sh takes its home from its own path
    for part in ("lib", "conf", "themes", "providers"):
        (run / part).symlink_to(home / part)
    url = f"http://127.0.0.1:{port}"
    admin_password = secrets.token_urlsafe(18)
    log_path = work / "keycloak.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(run / "bin" / "kc.sh"), "start-dev"], stdout=log, stderr=subprocess.STDOUT,
            env=_environment(home, port, admin_password), start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Keycloak did not start:\n" + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.3)
        if "Updating the configuration" in log_path.read_text(errors="replace"):
            raise RuntimeError(f"Keycloak rebuilt itself in the cache {home}: run `make setup` (it builds it again)")
        kc = Keycloak(url, proc.pid, admin_password)
        kc.create_realm()
        yield kc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if reserved:
            release_window(port)
        shutil.rmtree(work, ignore_errors=True)
