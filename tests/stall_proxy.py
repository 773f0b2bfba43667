"""A TCP proxy that a test can cut: ``python -m tests.stall_proxy LISTEN:TARGET ...`` (ports on 127.0.0.1).

It forwards each listening port to its target until it gets SIGUSR1; from then on it *stalls*: the bytes
of open connections are no longer forwarded and new connections are accepted but never served — what a
client sees when a network path silently drops packets (its requests time out, nothing is refused).
SIGUSR2 heals it: the stalled connections are closed and new ones are forwarded again. SIGTERM stops it.
It prints ``ready`` once every port listens. Used to cut one controller from the witness while everything
else still reaches it.
"""

from __future__ import annotations

import asyncio
import signal
import sys


class StallProxy:
    """The proxy's state: forwarding or stalled, and the connections open."""

    def __init__(self) -> None:
        self.stalled = False
        self.open: set[asyncio.StreamWriter] = set()

    async def pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer`` until either side closes (holding the bytes while stalled)."""
        try:
            while data := await reader.read(65536):
                while self.stalled:  # hold the bytes: the path drops them
                    await asyncio.sleep(0.05)
                    if writer.is_closing():
                        return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: int) -> None:
        """Forward one client connection to ``target`` (or hold it while stalled)."""
        self.open.add(writer)
        try:
            while self.stalled and not writer.is_closing():
                await asyncio.sleep(0.05)
            if writer.is_closing():
                return
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            except OSError:
                return
            self.open.add(up_writer)
            await asyncio.gather(self.pipe(reader, up_writer), self.pipe(up_reader, writer))
            self.open.discard(up_writer)
        finally:
            self.open.discard(writer)
            writer.close()

    def cut(self) -> None:
        """Stall every path."""
        self.stalled = True

    def heal(self) -> None:
        """Close what was stalled and forward again."""
        for w in list(self.open):
            w.close()
        self.stalled = False


async def main(pairs: list[tuple[int, int]]) -> None:
    """Listen on every pair's first port, forward to its second, until SIGTERM."""
    proxy = StallProxy()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, proxy.cut)
    loop.add_signal_handler(signal.SIGUSR2, proxy.heal)
    loop.add_signal_handler(signal.SIGTERM, done.set)
    servers = []
    for listen, target in pairs:

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, t: int = target) -> None:
            await proxy.serve(r, w, t)

        servers.append(await asyncio.start_server(handle, "127.0.0.1", listen))
    print("ready", flush=True)
    await done.wait()
    for s in servers:
        s.close()
    proxy.heal()


if __name__ == "__main__":
    asyncio.run(main([(int(a), int(b)) for a, b in (p.split(":") for p in sys.argv[1:])]))
