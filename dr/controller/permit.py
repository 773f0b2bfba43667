"""The lease permit: the file through which a site's brokers fail closed with the controller's lease.

The broker-side half of the self-fence (runbooks/controller.md, section 5): the brokers of a stack whose
failover policy is ``automatic`` run ``kafkadr.fence.LeaseFenceAuthorizer`` (``toolchain/lease-authorizer``),
Kafka's StandardAuthorizer plus one rule — an application write (WRITE on a topic or a transactional id,
IDEMPOTENT_WRITE on the cluster) is refused unless this file allows it *now*. The controller holding the
lease rewrites it after each successful renewal (or acquisition) with the instant until which writes are
allowed: when the renewal was sent + the lease's TTL − the margin, the same deadline the self-fence's
watchdog keeps (:func:`dr.controller.fence.renew_deadline`). A controller that stops renewing — cut off,
frozen, dead — lets the permit run out by itself, without having to act; one that loses the lease, gives it
up or stops revokes it at once. The brokers read the file on the request path (cached at most 100 ms on the
monotonic clock), so a broker resumed after a freeze judges the requests queued meanwhile when it serves
them, against a permit that ran out.

The file is a Java properties file (``until.ms``, ``token``, ``holder``), written atomically and 0600: the
brokers read it as the user they run as, which on the local estate is the controller's.
"""

from __future__ import annotations

from pathlib import Path

from dr.base.files import write_atomic
from dr.controller.witness import Holding

__all__ = ["LeasePermit", "permit_text"]


def permit_text(until_s: float, token: int, holder: str) -> str:
    """The permit's content: writes allowed until ``until_s`` (seconds since the epoch; 0 revokes) (pure)."""
    safe = "".join(ch for ch in holder if ch.isprintable() and ch not in "\\\n\r")
    return f"until.ms={int(until_s * 1000)}\ntoken={token}\nholder={safe}\n"


class LeasePermit:
    """The permit file of one site's brokers, written by the controller that holds (or held) the lease."""

    def __init__(self, path: Path, ttl_s: float, margin_s: float) -> None:
        self.path, self.ttl_s, self.margin_s = Path(path), ttl_s, margin_s
        self.until_s = 0.0
        """The instant the last grant allows writes until (0: revoked or never granted)."""

    def grant(self, holding: Holding, sent_wall: float) -> float:
        """Allow writes until ``sent_wall + ttl - margin`` (``sent_wall``: when the renewal or acquisition of
        ``holding`` that succeeded was sent); that instant."""
        until = sent_wall + self.ttl_s - self.margin_s
        write_atomic(self.path, permit_text(until, holding.token, holding.holder))
        self.until_s = until
        return until

    def revoke(self, token: int = 0, holder: str = "") -> None:
        """Refuse writes from now on (the lease was lost, given up or released)."""
        write_atomic(self.path, permit_text(0, token, holder))
        self.until_s = 0.0
