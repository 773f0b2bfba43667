"""The fencing token's check before an automatic failover promotes: the run started by a controller goes on
only while the witness still holds the lease with the token it was started with.

A controller starts ``drctl failover`` with ``--fencing-token T`` (the lease's create revision when it took
it). Before the promote step grants writes on the passive cluster, :func:`require_token` asks the witness
who holds the lease now: another token (a newer holder, the active site back and holding it, nobody) or a
witness that does not answer refuses the step — the run stops before any write is granted, the journal
keeps it, and a person (or the controller that holds the lease) resumes it. Fail closed: no answer is no.
"""

from __future__ import annotations

from collections.abc import Callable

from dr.base.errors import ClusterError, ConfigError, FailoverError
from dr.controller.witness import Witness
from dr.topology import Topology

__all__ = ["lease_guard", "require_token"]


def require_token(witness: Witness, token: int, stack: str) -> None:
    """Refused (FailoverError) unless the witness holds the stack's lease with ``token`` now."""
    try:
        current = witness.current()
    except ClusterError as exc:
        raise FailoverError(
            f"this run was started by a controller with fencing token {token}, and the witness "
            f"({witness.describe()}) does not answer to confirm it still holds the lease: {exc.problem}",
            f"nothing was promoted; when the witness answers, resume with `drctl failover --stack {stack} --yes` "
            "(the controller holding the lease resumes it by itself)",
        ) from None
    if current is None or current.token != token:
        now = "nobody holds it" if current is None else f"{current.holder} holds it with token {current.token}"
        raise FailoverError(
            f"this run was started by a controller with fencing token {token}, but the lease moved on: {now}.",
            "nothing was promoted; read the controllers' logs (`automatic-*` events) before resuming with "
            f"`drctl failover --stack {stack} --yes`",
        )


def lease_guard(stack: str, topology: Topology, token: int) -> Callable[[], None]:
    """The check :func:`require_token` against the witness the stack declares (ConfigError when it has none)."""
    from dr.controller.loop import witness_for

    if topology.failover_policy.witness is None:
        raise ConfigError(
            f"--fencing-token {token} was given, but stack '{stack}' declares no witness to check it against.",
            "drop --fencing-token (it is the controller's), or declare failover_policy.witness",
        )

    def check() -> None:
        witness = witness_for(stack, topology)
        if witness is None:  # declared, checked above: only a stack file changed under the run gets here
            raise ConfigError(f"stack '{stack}' no longer declares a witness.", "restore failover_policy.witness")
        try:
            require_token(witness, token, stack)
        finally:
            witness.close()

    return check
