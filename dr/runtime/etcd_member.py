"""One etcd member on 127.0.0.1, started from the toolchain's etcd (Debian's, fetched by ``make setup``).

The witness an automatic drill rehearses with (:mod:`dr.failover.drill.unattended`): a drill never touches
the team's witness, as it never touches the stack it rehearses. The members of a real witness are the
team's, three on three sites (runbooks/controller.md); the tests' three-member clusters are built from
:func:`member_command` too.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

from dr.base.errors import ClusterError
from dr.base.files import private_dir
from dr.base.toolchain import etcd

__all__ = ["EtcdMember", "healthy", "member_command"]


def member_command(
    binary: Path, name: str, data_dir: Path, client_url: str, peer_url: str, cluster: str, token: str
) -> list[str]:
    """The command line of member ``name`` of the cluster ``cluster`` (``m0=http://...,m1=...``), new (pure)."""
    return [
        str(binary), "--name", name, "--data-dir", str(data_dir),
        "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", token,
    ]  # fmt: skip


def healthy(url: str) -> bool:
    """True when the member at client ``url`` reports itself healthy (``/health``)."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:  # noqa: S310 — a loopback URL of ours
            return bool(json.loads(response.read().decode()).get("health") == "true")
    except (OSError, ValueError):
        return False


class EtcdMember:
    """A one-member etcd cluster: data and log under ``directory`` (0700), client port ``client_port``, peer
    port ``peer_port``, both on 127.0.0.1."""

    def __init__(self, directory: Path, client_port: int, peer_port: int) -> None:
        self.directory = Path(directory)
        self.url = f"http://127.0.0.1:{client_port}"
        self.peer_url = f"http://127.0.0.1:{peer_port}"
        self.log = self.directory / "etcd.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        """Start the member and wait until it is healthy; :class:`ClusterError` naming its log otherwise."""
        private_dir(self.directory)
        command = member_command(
            etcd().binary("etcd"), "drill", self.directory / "data", self.url, self.peer_url,
            f"drill={self.peer_url}", self.directory.name,
        )  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # noqa: S603
        deadline = time.monotonic() + timeout
        while not healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ClusterError(
                    f"the drill's etcd witness at {self.url} did not become healthy.",
                    f"read {self.log} (a port taken by another process is the usual cause)",
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill the member and reap it (its data is the drill's, thrown away with it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
