"""``drctl controller``: the per-site controller in the foreground (:mod:`dr.controller`)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from dr.base.stackref import StackRef
from dr.cli.options import STACK

__all__ = ["controller"]


@click.command("controller")
@click.option("--stack", "ref", type=STACK, required=True, help="The stack whose site this controller watches.")
@click.option("--site", default=None, help="The cluster this controller runs beside (a cluster of the stack).")
@click.option(
    "--observer",
    default=None,
    help="Instead of --site: run as a third site's observer NAME — probe every serving cluster, publish the "
    "verdicts in the witness, never act.",
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True, help="One line per event."
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1024, 65535),
    default=None,
    help="Serve the metrics on this port instead of failoverPolicy.metricsPorts.SITE (a second controller of a site).",
)
@click.option(
    "--lease-permit-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the site's lease permit here: the file the brokers' lease fence reads (their "
    "kdr.lease.permit.file) — for an external cluster; a local cluster's is known.",
)
def controller(
    ref: StackRef,
    site: str | None,
    observer: str | None,
    log_format: str,
    metrics_port: int | None,
    lease_permit_file: Path | None,
) -> None:
    """Watch the site's cluster and the stack, serve Prometheus metrics, alert — until SIGTERM.

    Each pass probes the site's cluster (metadata, and one record produced to the topic
    kdr-controller-canary), reads `drctl status` (links, lag, problems: kdr_ready), and the lease in the
    witness that kafka-dr:failoverPolicy declares (the active site's controller holds it). Metrics are
    served at http://127.0.0.1:<failoverPolicy.metricsPorts.SITE>/metrics. It detects and alerts; with
    mode automatic the passive site's controller fails the stack over by itself when the active cluster is
    lost, two observers agree, the lease has expired and the policy allows it (runbooks/controller.md). Exit 0 after SIGTERM or Ctrl-C; 2 on bad input (no metrics port
    declared for the site, the port taken, a postgres witness without a team database) — nothing started.

    With --observer NAME (a third site): probes the active and the passive cluster, publishes its verdicts
    in the witness under NAME — the second observer the passive site needs when the whole active site is
    lost — and never acts; no metrics. Exit 2 without a witness or when NAME is a cluster's.

    The controller holding the lease also writes the site's lease permit after each renewal: the brokers of
    a stack in mode automatic (a local cluster's, or those that install toolchain/lease-authorizer) refuse
    application writes once it has run out. --lease-permit-file without a witness: exit 2.
    """
    from dr.base.errors import ConfigError
    from dr.controller.loop import Controller, Log, witness_for
    from dr.controller.observer import Observer
    from dr.topology import load_stack_file

    if (site is None) == (observer is None):
        raise ConfigError(
            "drctl controller runs either beside a cluster (--site) or as a third site's observer (--observer).",
            f"pass one of them: `drctl controller --stack {ref.name} --site A` or `--observer C-site`",
        )
    if observer is not None and lease_permit_file is not None:
        raise ConfigError(
            "--lease-permit-file is a site's: an observer holds no lease and writes no permit.",
            f"drop --lease-permit-file, or run `drctl controller --stack {ref.name} --site <cluster> --lease-permit-file ...`",
        )
    log = Log("json" if log_format == "json" else "text")
    ctl: Controller | Observer
    if site is not None:
        ctl = Controller(
            ref, site, log, metrics_port, lease_permit_file
        )  # bad input is refused here, before anything starts
    else:
        ctl = Observer(ref, str(observer), log, witness_for(ref.name, load_stack_file(ref.existing_stack_file())))
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        log("info", "stopping", f"{signal.Signals(signum).name} received: stopping")
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    ctl.run(stop)
