"""A throwaway OpenID Connect server for the OAUTHBEARER tests: ``no.nav.security:mock-oauth2-server`` from the
cache (``scripts/setup.sh`` copies its jars from Maven Central), on 127.0.0.1 at a free port below 32768
(:mod:`tests.integration.ports`), in its own process group, killed at the end with nothing left behind.

It serves one issuer (:data:`ISSUER`): ``<url>/<issuer>/token`` grants the client-credentials flow to any client
(this server checks no client secret: a refused client is shown by the brokers, e.g. a token for another
audience), the token's ``sub`` is the client id and its ``aud`` the requested scope; ``<url>/<issuer>/jwks``
holds the keys the brokers validate signatures with.

``with oidc_server() as idp:`` yields an :class:`OidcServer`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dr.base.toolchain import oidc_server_lib, toolchain

__all__ = ["ISSUER", "OidcServer", "oidc_server"]

ISSUER = "kafka"
"""The issuer id the tests use (the path segment of every endpoint)."""


@dataclass(frozen=True)
class OidcServer:
    """A running server: its base URL and the endpoints of :data:`ISSUER`."""

    url: str
    pid: int

    @property
    def issuer(self) -> str:
        """The ``iss`` of its tokens."""
        return f"{self.url}/{ISSUER}"

    @property
    def token_endpoint(self) -> str:
        """Where clients fetch tokens (client-credentials grant)."""
        return f"{self.issuer}/token"

    @property
    def jwks(self) -> str:
        """The JSON Web Key Set brokers validate tokens with."""
        return f"{self.issuer}/jwks"

    def token(self, client_id: str, client_secret: str, scope: str) -> dict[str, Any]:
        """A client-credentials token response (``access_token``, ``expires_in`` ...), as a client asks for one."""
        body = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": scope}).encode()
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        request = urllib.request.Request(self.token_endpoint, body, {"Authorization": f"Basic {basic}"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 — a loopback URL of ours
            return dict(json.loads(response.read().decode()))


def _alive(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/isalive", timeout=2) as response:  # noqa: S310 — loopback
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def oidc_server() -> Iterator[OidcServer]:
    """Start the server (see the module doc), yield it once ``/isalive`` answers, kill it and its group after."""
    from tests.integration.ports import free_window, release_window

    lib, java = oidc_server_lib(), toolchain().java
    port = free_window(1)
    work = Path(tempfile.mkdtemp(prefix="kdr-oidc-"))
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "SERVER_HOSTNAME": "127.0.0.1", "SERVER_PORT": str(port)}
    env.pop("JSON_CONFIG", None)
    with (work / "oidc.log").open("wb") as log:
        proc = subprocess.Popen(
            [java, "-Xms32m", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*",
             "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not _alive(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the OIDC server did not start:\n" + (work / "oidc.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.2)
        yield OidcServer(url, proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        release_window(port)
        shutil.rmtree(work, ignore_errors=True)
