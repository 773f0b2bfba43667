"""Module-scoped real clusters: started for a module, stopped (and their data removed) after it. Nothing a
module leaves — topics, MirrorMaker 2's connector configurations, ACLs — reaches another module, so the
order and pairing xdist picks cannot change a result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker
from tests.integration.helpers import StackEnv, provisioned, write_local_stack
from tests.integration.ports import windows


@pytest.fixture(scope="module")
def estate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The state directory of the module's clusters (their data and MirrorMaker 2's, the module's own)."""
    return tmp_path_factory.mktemp("estate")


@pytest.fixture(scope="module")
def stack_ports() -> Iterator[tuple[int, int, int]]:
    """Three free port windows (A, B, C of a stack), reserved against other test runs until the module ends."""
    with windows(3) as starts:
        yield starts


@pytest.fixture(scope="module")
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]
) -> Iterator[StackEnv]:
    """The module's stack ``STACK``, written from ``LOCAL_EXAMPLE`` (default ``Pulumi.local.yaml``; A on one
    broker) on :func:`stack_ports`, provisioned once for the module and destroyed after it. A module that
    needs another estate declares its own ``env``."""
    stack = request.module.STACK
    root = tmp_path_factory.mktemp(stack)
    write_local_stack(root, stack, stack_ports, example=getattr(request.module, "LOCAL_EXAMPLE", "Pulumi.local.yaml"))
    with provisioned(StackEnv(root, stack)) as e:
        yield e


@pytest.fixture
def port_window() -> Iterator[int]:
    """One free port window (a local cluster's 100 ports) for one test."""
    with windows(1) as (start,):
        yield start


def _cluster(estate_dir: Path, name: str, brokers: int) -> Iterator[LocalCluster]:
    with windows(1) as (base_port,):
        cluster = LocalCluster(ClusterSpec(name, brokers=brokers, base_port=base_port), estate_dir)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.destroy()


@pytest.fixture(scope="module")
def cluster3(estate_dir: Path) -> Iterator[LocalCluster]:
    """A 3-broker cluster (dedicated controller) on 3 racks."""
    yield from _cluster(estate_dir, "T3", 3)


@pytest.fixture(scope="module")
def cluster_a(estate_dir: Path) -> Iterator[LocalCluster]:
    """Active cluster A, 1 broker."""
    yield from _cluster(estate_dir, "A", 1)


@pytest.fixture(scope="module")
def cluster_b(estate_dir: Path) -> Iterator[LocalCluster]:
    """Passive cluster B, 1 broker."""
    yield from _cluster(estate_dir, "B", 1)


@pytest.fixture(scope="module")
def mm2_ab(cluster_a: LocalCluster, cluster_b: LocalCluster, estate_dir: Path) -> Iterator[MirrorMaker]:
    """MirrorMaker 2 replicating A → B."""
    mm = MirrorMaker(cluster_a, cluster_b, estate_dir)
    mm.start()
    try:
        yield mm
    finally:
        mm.stop()
