"""Run a command in a network namespace of its own, reaching chosen 127.0.0.1 ports of the host only through
this bridge — and some of them not at all: a real network cut for one process, on one machine.

``python -m tests.netns_bridge --dir D --ports 20000,20001,... [--cut 20000,...] -- CMD ARGS...``

The outer process (in the host's namespace) serves one Unix socket per port in ``D`` (Unix sockets live in
the file system, not in a network namespace) and forwards each connection to ``127.0.0.1:<port>``. It starts
``unshare --net`` (root only) with the inner process, which brings the new namespace's loopback up, listens
on ``127.0.0.1:<port>`` there for every port and forwards to the Unix socket — except the ``--cut`` ports,
whose connections are accepted and then left unanswered (what is sent is read and dropped), as a partition
that swallows packets looks to a client: its requests time out, nothing refuses them. Then it runs ``CMD``
(the same loopback addresses work inside as outside), relays SIGTERM/SIGINT to it, and both exit with its
exit code. A process-group kill takes all three.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from tests.stall_proxy import StallProxy

_FORWARD = StallProxy()
"""Never stalled: only its byte pipe is used (a cut port here answers nothing from the start: :func:`_swallow`)."""

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _join(open_other: Callable[[], Awaitable[Streams]]) -> Handler:
    """A handler forwarding each connection to the one ``open_other`` opens."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            other_reader, other_writer = await open_other()
        except OSError:
            writer.close()
            return
        await asyncio.gather(_FORWARD.pipe(reader, other_writer), _FORWARD.pipe(other_reader, writer))

    return handle


async def _swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A cut port: keep the connection, answer nothing."""
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(65536):
            pass
    writer.close()


async def _run(command: list[str]) -> int:
    proc = await asyncio.create_subprocess_exec(*command)
    loop = asyncio.get_running_loop()

    def relay(sig: int) -> None:
        if proc.returncode is None:
            proc.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, relay, sig)
    return await proc.wait()


async def _outer(directory: Path, ports: list[int], argv: list[str]) -> int:
    for port in ports:
        path = directory / f"{port}.sock"
        path.unlink(missing_ok=True)
        await asyncio.start_unix_server(
            _join(partial(asyncio.open_connection, "127.0.0.1", port)),
            path=str(path),
        )
    inner = ["unshare", "--net", "--", sys.executable, "-m", "tests.netns_bridge", "--inner", *argv]
    return await _run(inner)


async def _inner(directory: Path, ports: list[int], cut: set[int], command: list[str]) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)  # noqa: S607 — iproute2 in the new namespace
    for port in ports:
        handler: Handler = (
            _swallow if port in cut else _join(partial(asyncio.open_unix_connection, str(directory / f"{port}.sock")))
        )
        await asyncio.start_server(handler, "127.0.0.1", port)
    return await _run(command)


def main() -> None:
    """The command line (see the module doc)."""
    parser = argparse.ArgumentParser(prog="netns_bridge")
    parser.add_argument("--inner", action="store_true")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--ports", required=True)
    parser.add_argument("--cut", default="")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    ports = [int(p) for p in args.ports.split(",") if p]
    cut = {int(p) for p in args.cut.split(",") if p}
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.inner:
        code = asyncio.run(_inner(args.dir, ports, cut, command))
    else:
        argv = ["--dir", str(args.dir), "--ports", args.ports, "--cut", args.cut, "--", *command]
        code = asyncio.run(_outer(args.dir, ports, argv))
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
