"""A throwaway etcd cluster for tests: Debian's etcd from the cache (``scripts/setup.sh etcd``), ``members``
processes on 127.0.0.1 at free ports below 32768 (:mod:`tests.integration.ports`), data in a temporary
directory; every member is killed and the directory removed at the end, so no process is left.

``with etcd_cluster(3) as cluster:`` yields an :class:`EtcdCluster`; ``cluster.endpoints`` are the members'
client URLs, ``cluster.kill(i)`` SIGKILLs member ``i`` and ``cluster.restart_all()`` starts the killed ones again on their data.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dr.base.toolchain import etcd
from dr.runtime.etcd_member import healthy, member_command

__all__ = ["EtcdCluster", "etcd_cluster"]


@dataclass
class EtcdCluster:
    """The members' client URLs and processes (see the module doc)."""

    endpoints: list[str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def kill(self, member: int) -> None:
        """SIGKILL member ``member`` and reap it."""
        self.processes[member].kill()
        self.processes[member].wait()

    def restart_all(self) -> None:
        """Start every killed member again on its data directory (a lone member cannot serve without its
        quorum), and wait until each is healthy."""
        for i, proc in enumerate(self.processes):
            if proc.poll() is not None:
                with self.logs[i].open("ab") as log:
                    self.processes[i] = subprocess.Popen(self.commands[i], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not all(healthy(url) for url in self.endpoints):
            if time.monotonic() > deadline:
                raise RuntimeError("etcd members did not come back: " + self.logs[0].read_text()[-1500:])
            time.sleep(0.2)

    def kill_all(self) -> None:
        """SIGKILL every member still running."""
        for i, proc in enumerate(self.processes):
            if proc.poll() is None:
                self.kill(i)


@contextmanager
def etcd_cluster(members: int = 3) -> Iterator[EtcdCluster]:
    """Start an etcd cluster of ``members`` members and wait until each reports healthy (see the module doc)."""
    from tests.integration.ports import free_window, release_window

    binary = etcd().binary("etcd")
    start = free_window(2 * members)
    work = Path(tempfile.mkdtemp(prefix="kdr-etcd-"))
    names = [f"m{i}" for i in range(members)]
    peers = [f"http://127.0.0.1:{start + members + i}" for i in range(members)]
    cluster = EtcdCluster(endpoints=[f"http://127.0.0.1:{start + i}" for i in range(members)])
    initial = ",".join(f"{n}={p}" for n, p in zip(names, peers, strict=True))
    try:
        for i, name in enumerate(names):
            command = member_command(binary, name, work / name, cluster.endpoints[i], peers[i], initial, work.name)
            cluster.commands.append(command)
            cluster.logs.append(work / f"{name}.log")
            with cluster.logs[-1].open("wb") as log:
                cluster.processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while not all(healthy(url) for url in cluster.endpoints):
            dead = [names[i] for i, p in enumerate(cluster.processes) if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join((work / f"{n}.log").read_text(errors="replace")[-1500:] for n in names)
                raise RuntimeError(f"etcd members did not become healthy (exited: {dead}):\n{logs}")
            time.sleep(0.2)
        yield cluster
    finally:
        cluster.kill_all()
        release_window(start)
        shutil.rmtree(work, ignore_errors=True)
