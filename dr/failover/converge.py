"""Writing the desired state back to the stack file, and converging reality to it.

The failover changes *desired state* only: :func:`write_stack_config` replaces the ``kafka-dr:``
keys of ``Pulumi.<stack>.yaml`` with the new topology and leaves every other key alone. A
:class:`Converger` then makes the estate match it.

Today the one converger is :class:`EstateConverger`: **the local estate runtime converges**
(:meth:`dr.estate.Estate.up` starts the new passive cluster with its users, topics and ACLs and
the MirrorMaker 2 link from the new active). **The Pulumi Automation API converger is blocked on
the provider**: the Kafka provider plugin and the Python language host cannot be fetched on this
machine (the Go module proxy answers 403), so ``pulumi up`` of the stack program cannot run here.
A ``PulumiConverger`` implementing the same protocol (``auto.select_stack(...).up()``) will
replace it without touching the pipeline.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Protocol

import yaml

from dr.errors import ClusterError, ConfigError
from dr.estate import Estate, Progress
from dr.failover.metrics import encode_offsets, lag
from dr.kafka_client import Endpoint
from dr.runtime.mirrormaker import end_offsets
from dr.runtime.process import wait_until
from dr.topology import NAMESPACE, Topology, dump_stack_config

__all__ = ["Converger", "PulumiConverger", "read_stack_config", "wait_copied", "write_stack_config"]


class Converger(Protocol):
    """Makes the estate match a topology; returns timings (seconds) per sub-step."""

    name: str

    def converge(self, topology: Topology, progress: Progress) -> dict[str, float]:
        """Create or update whatever ``topology`` declares; idempotent."""
        ...


class PulumiConverger:
    """Converges with ``pulumi up`` of the stack (:class:`dr.stack.EstateStack`, the program of
    ``stacks/`` through the Automation API), then waits until each local link has copied what its
    source held when the ``up`` ended."""

    name = "pulumi"

    def __init__(self, stack: str, stack_path: Path, state: Path, *, catch_up_timeout: float = 120.0) -> None:
        self.stack = stack
        self.stack_path = Path(stack_path)
        self.state = Path(state)
        self.catch_up_timeout = catch_up_timeout

    def converge(self, topology: Topology, progress: Progress) -> dict[str, float]:
        """``pulumi up`` of the stack file (already holding ``topology``); wait until links catch up."""
        from dr.stack import EstateStack

        timings = dict(EstateStack(self.stack, stack_dir=self.stack_path.parent, state_dir=self.state)
                       .up(topology, progress=progress))
        estate = Estate(topology, self.state)
        topics = [t.name for t in topology.topics]
        for link in topology.links:
            if not estate.both_local(link.name):
                continue
            t0 = time.monotonic()
            wanted = [t.name for t in topology.topics_for(link)] or topics
            progress(f"link {link.name}: waiting until {link.target} holds what {link.source} holds now")
            wait_copied(estate.endpoint(link.source), estate.endpoint(link.target), wanted,
                        timeout=self.catch_up_timeout, what=f"link {link.name}")
            timings[f"link {link.name} caught up"] = round(time.monotonic() - t0, 3)
        return timings


def wait_copied(source: Endpoint, target: Endpoint, topics: list[str], *, timeout: float, what: str) -> None:
    """Wait until the target's end offsets reach the source's end offsets *as of now*.

    A fixed watermark (not "lag is 0") so the wait ends even while applications keep writing
    to the source.
    """
    watermark = end_offsets(source, topics)
    if not wait_until(lambda: all(end_offsets(target, topics).get(tp, 0) >= n for tp, n in watermark.items()),
                      timeout, interval=0.25):
        behind = lag(watermark, end_offsets(target, topics))
        raise ClusterError(f"{what} did not copy {sum(behind.values())} records within {timeout:.0f}s "
                           f"(per partition: {encode_offsets({k: v for k, v in behind.items() if v})}).",
                           "check the MirrorMaker 2 log under <state>/links/, then rerun the failover (it resumes)")


def _document(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        raise ConfigError(f"stack file {path} is not a YAML mapping", "start it with a `config:` mapping")
    return doc, text


def read_stack_config(path: Path) -> dict[str, Any]:
    """The ``kafka-dr:`` entries of a stack file, normalised through the topology model."""
    from dr.topology import load_stack_file

    return dump_stack_config(load_stack_file(path))


def write_stack_config(path: Path, topology: Topology) -> bool:
    """Replace the ``kafka-dr:`` keys of the stack file with ``topology``; return True when it changed.

    Other keys (other namespaces, ``encryptionsalt``, ...) are kept, and so is the comment block at
    the top of the file; comments inside the ``kafka-dr:`` section are not (PyYAML drops them).
    The file is written atomically with its previous mode.
    """
    path = Path(path)
    if read_stack_config(path) == dump_stack_config(topology):
        return False
    doc, text = _document(path)
    config = {k: v for k, v in (doc.get("config") or {}).items() if not str(k).startswith(f"{NAMESPACE}:")}
    config.update(dump_stack_config(topology))
    doc["config"] = config
    header = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(header) + ("\n" if header else "") + body, encoding="utf-8")
    os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)
    return True
