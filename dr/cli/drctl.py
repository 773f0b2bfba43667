"""``drctl``: the command line. Every command exits with the codes documented in :mod:`dr.base.errors`."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import click

from dr.base.errors import (
    EXIT_INTERRUPTED,
    ClusterError,
    ConfigError,
    DRError,
    FailoverError,
    InternalError,
    exit_codes_help,
    mask_secrets,
)
from dr.base.stackref import StackRef
from dr.cli.failover import failover_commands, progress, warn_if_too_large
from dr.cli.options import STACK
from dr.cli.verify import verification_commands

if TYPE_CHECKING:  # the lifecycle loads when a lifecycle command runs
    from dr.failover.lifecycle import LinkChange


def _printed_json(value: object, as_json: bool) -> bool:
    """With ``--json``: print ``value`` as JSON on stdout and return True (the command is done)."""
    if as_json:
        click.echo(json.dumps(value, indent=2))
    return as_json


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=exit_codes_help())
@click.version_option(package_name="kafka-dr", prog_name="drctl")
def cli() -> None:
    """Declarative disaster recovery for Apache Kafka."""


# --------------------------------------------------------------------------------------- estate
@cli.group()
def estate() -> None:
    """The stack's estate through Pulumi (up, preview, down, standby), one cluster started, its live status."""


@estate.command("up")
@click.option(
    "--stack", "ref", type=STACK, default="local", show_default=True, help="Stack whose Pulumi.<stack>.yaml to run."
)
@click.option("--refresh", is_flag=True, help="Read the real estate first (after a restart: start what stopped).")
@click.option("--json", "as_json", is_flag=True, help="Print timings as JSON.")
def estate_up(ref: StackRef, refresh: bool, as_json: bool) -> None:
    """`pulumi up` of the stack: clusters, users, topics, ACLs and links as the stack file declares.

    Then every application's client configuration for the cluster its grants are on (the active
    cluster; an edge's applications their edge; an active-active application its home) is written to
    <state>/clients/<app>.properties (Java) and <app>.json (librdkafka), mode 0600 — they hold
    passwords, so only their paths are printed (stderr). Prints the time per step."""
    from dr.estate.estate import Estate, load_stack
    from dr.estate.stack import EstateStack
    from dr.failover.act.clients import publish_clients
    from dr.failover.act.tls_check import refuse_tls_failures
    from dr.failover.frame.journal import Journal
    from dr.failover.frame.stack_guard import refuse_up_mid_failover

    topology = load_stack(ref)  # a broken rule stops here, before the engine starts
    refuse_up_mid_failover(Journal.load(ref.failover_home), ref.name)
    warn_if_too_large(topology)
    refuse_tls_failures(Estate(topology, ref.made_state_dir()))  # ... and a failing TLS handshake here
    timings = EstateStack(ref).up(topology, refresh=refresh, progress=progress)
    # each application against the cluster its grants are on: the active, its edge, its home peer
    written = publish_clients(Estate(topology, ref.made_state_dir()))
    for cluster in dict.fromkeys(w["cluster"] for w in written):
        files = ", ".join(w["properties"] for w in written if w["cluster"] == cluster)
        progress(f"client configurations for {cluster}: {files}")
    if as_json:
        click.echo(json.dumps({"stack": ref.name, "timings_s": timings}, indent=2))
    else:
        for step, secs in timings.items():
            click.echo(f"{step:<24} {secs:6.1f}s")


@estate.command("preview")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option("--refresh", is_flag=True, help="Read the real estate first.")
@click.option("--expect-no-changes", is_flag=True, help="Exit 4 when the preview proposes any change.")
def estate_preview(ref: StackRef, refresh: bool, expect_no_changes: bool) -> None:
    """`pulumi preview` of the stack: what an `up` would change now."""
    from dr.estate.stack import EstateStack

    stack = ref.name
    summary = EstateStack(ref).preview(refresh=refresh)
    click.echo(summary.text)
    if expect_no_changes and not summary.clean:
        raise ClusterError(
            f"stack {stack!r} differs from its stack file: {summary.changes}.",
            f"run `drctl estate up --stack {stack}` (or `pulumi up`) to converge it",
        )


@estate.command("start")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option("--cluster", "cluster_name", required=True, help="The local cluster to start, e.g. the lost A.")
def estate_start(ref: StackRef, cluster_name: str) -> None:
    """Start one local cluster's brokers again with their data (e.g. A after an unplanned failover,
    so the failover can fence and verify it). Provisions nothing: the stack keeps its roles."""
    from dr.estate.estate import Estate
    from dr.failover.drill.frame import restart

    stack = ref.name
    cluster = Estate.for_stack(ref).local_cluster(cluster_name)
    if cluster.state() == "absent":
        raise ClusterError(
            f"cluster {cluster_name!r} of stack {stack!r} has no data on this machine.",
            "nothing to start: provision it with `pulumi up` (roles active/passive) instead",
        )
    restart(cluster)
    progress(f"cluster {cluster_name} running at {cluster.bootstrap} ({cluster.state()})")


@estate.command("down")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option("--destroy", is_flag=True, help="`pulumi destroy`: stop everything and delete the clusters' data.")
def estate_down(ref: StackRef, destroy: bool) -> None:
    """Stop links and clusters cleanly, data kept (`drctl estate up --refresh` brings them back);
    with --destroy, `pulumi destroy` the stack — refused while a failover runs (exit 7) — and the
    stack's failover journal is ended: archived as failover/abandoned-<id>-<time>.json, never resumed."""
    from dr.estate.estate import Estate
    from dr.estate.stack import EstateStack

    if destroy:
        from dr.failover.lifecycle import destroy_estate

        destroy_estate(ref, lambda: EstateStack(ref).destroy(progress), progress)
    else:
        Estate.for_stack(ref).stop(progress=progress)


@estate.command("status")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def estate_status(ref: StackRef, as_json: bool) -> None:
    """Roles, process state, bootstrap servers and link lag per partition."""
    from dr.estate.estate import Estate
    from dr.topology.client_endpoint import endpoint_drift

    status = Estate.for_stack(ref).status()
    if _printed_json(status, as_json):
        return
    click.echo(f"stack {status['stack']}")
    for c in status["clusters"]:
        click.echo(
            f"  cluster {c['name']:<4} {c['role']:<14} {c.get('state', c['kind']):<9} {c.get('bootstrap') or ''}"
        )
    for link in status["links"]:
        detail = link.get("error") or f"lag {link.get('total_lag')} records"
        if link.get("failure"):
            detail += f"; {link['failure']}"
        click.echo(f"  link    {link['name']:<10} {link.get('process', '?'):<8} {detail}")
        for partition, n in (link.get("lag") or {}).items():
            if n:
                click.echo(f"      {partition:<24} lag {n}")
    ep = status.get("endpoint")
    if ep is not None:
        where = ep.get("error") or f"points at {', '.join(ep.get('points_at') or []) or 'nothing'}"
        click.echo(f"  endpoint {ep['bootstrap']} proxy {ep.get('proxy', 'external')}: {where}")
        from dr.failover.frame.journal import Journal

        journal = Journal.load(ref.failover_home)
        unfinished = journal is not None and journal.status in ("running", "failed", "interrupted")
        if drift := endpoint_drift(ep, ref.name, unfinished):
            click.echo(f"  PROBLEM: {drift}")


@estate.command("standby")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option(
    "--cluster",
    "cluster_name",
    required=True,
    help="The decommissioned local cluster to wipe and declare standby, e.g. A after A→B→C.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the checks, the stack file diff and Pulumi's preview; change nothing."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (its data is deleted).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def estate_standby(ref: StackRef, cluster_name: str, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Wipe a cluster a completed failover decommissioned and declare it the next standby.

    Its role becomes `standby` in Pulumi.<stack>.yaml (only that value changes) and `pulumi up`
    deletes its cluster: processes stopped, data removed. The next `drctl failover` makes it the
    passive cluster: A→B→C, then B→C→A. Refused (exit 6) while the last failover is not
    completed — its data may hold records recovery still needs — or when the cluster is not
    decommissioned; exit 2 for an unknown or external cluster, 7 while a failover runs.
    """
    from dr.failover.lifecycle import make_standby, standby_plan

    stack = ref.name
    if dry_run:
        plan = standby_plan(ref, cluster_name)
        if _printed_json(plan, as_json):
            return
        click.echo(
            f"DRY RUN — cluster {cluster_name} of stack {stack}: {plan['old_role']} → standby; "
            f"now {plan['process']}; nothing is changed"
        )
        click.echo(f"data that would be removed: {plan['data_to_remove'] or '(none)'}")
        click.echo("stack file diff:")
        click.echo(plan["stack_file_diff"].rstrip() or "  (no change)")
        preview = plan.get("pulumi_preview") or {}
        click.echo(
            f"pulumi preview: not available — {preview['error']}"
            if preview.get("error")
            else "pulumi preview:\n" + preview.get("text", "").rstrip()
        )
        return
    if not yes:
        checked = standby_plan(ref, cluster_name, preview=False)  # refusals come first
        if not sys.stdin.isatty():
            raise FailoverError(
                f"refusing to delete cluster {cluster_name}'s data without confirmation.",
                f"pass --yes (look at `drctl estate standby --stack {stack} --cluster {cluster_name} --dry-run` first)",
            )
        where = checked["data_to_remove"] or "no data on this machine"
        click.confirm(
            f"Delete every record of cluster {cluster_name} ({where}) and declare it the standby of stack {stack}?",
            abort=True,
        )
    result = make_standby(ref, cluster_name, progress)
    if _printed_json(result.model_dump(mode="json"), as_json):
        return
    click.echo(
        f"cluster {result.cluster} of stack {stack}: {result.old_role} → {result.new_role} "
        f"in {result.seconds:.1f}s; data removed ({result.data_removed}) by {result.removed_by}"
    )
    for line in result.next:
        click.echo(f"next: {line}")


# ----------------------------------------------------------------------------------------- link
@cli.group()
def link() -> None:
    """Stop or start one link's MirrorMaker 2 between two local clusters.

    Exit codes: 0 done (also when it already was so) · 2 unknown link (the known ones are named) or
    a link not run on this machine · 4 its source or target cluster is not running · 6 start
    refused: the link's source was failed over · 7 a failover of the stack is running.
    """


def _link_result(result: LinkChange, as_json: bool) -> None:
    if not _printed_json(result.model_dump(mode="json"), as_json):
        click.echo(
            f"link {result.link} ({result.source} → {result.target}): {result.was} → "
            f"{result.now} in {result.seconds:.1f}s"
        )


@link.command("stop")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option("--link", "link_name", required=True, help="The link's name, e.g. A-to-B.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def link_stop_cmd(ref: StackRef, link_name: str, as_json: bool) -> None:
    """Stop the link's MirrorMaker 2; it keeps its positions. `drctl status` exits 4 until it runs again."""
    from dr.failover.lifecycle import link_stop

    _link_result(link_stop(ref, link_name, progress), as_json)


@link.command("start")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option("--link", "link_name", required=True, help="The link's name, e.g. A-to-B.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def link_start_cmd(ref: StackRef, link_name: str, as_json: bool) -> None:
    """Start the link's MirrorMaker 2 again from the positions it had reached.

    Refused (exit 6) for a link whose source was failed over: the records `drctl recover` wrote
    to the target would be copied a second time. Declare that cluster the next standby instead
    (`drctl estate standby`).
    """
    from dr.failover.lifecycle import link_start

    _link_result(link_start(ref, link_name, progress), as_json)


@cli.command("connect-config")
@click.option("--stack", "ref", type=STACK, required=True, help="Stack whose links join external clusters.")
@click.option("--link", "link_name", help="Only this link (default: every external link).")
def connect_config(ref: StackRef, link_name: str | None) -> None:
    """Print the MirrorMaker 2 connector configs (JSON) to PUT on a Kafka Connect cluster."""
    from dr.estate.estate import load_stack
    from stacks.links.connect_config import connector_configs

    topo = load_stack(ref)
    links = [lk for lk in topo.links if link_name in (None, lk.name)]
    if not links:
        raise click.BadParameter(f"no link {link_name!r} in stack {ref.name!r}", param_hint="--link")
    out = {}
    for link in links:
        connect = topo.link_connect(link)
        creds = connect.replicator_credentials if connect is not None else None
        refs = creds.references() if creds is not None else None
        out.update(connector_configs(topo, link, credentials=refs, keystore=creds))
    click.echo(json.dumps(out, indent=2, sort_keys=True))


# ------------------------------------------------------------------------------------------ tls
@cli.command("tls")
@click.option("--stack", "ref", type=STACK, default="local", show_default=True)
@click.option(
    "--within",
    type=click.FloatRange(min=0),
    default=30,
    show_default=True,
    help="Exit 9 when a certificate expires within this many days.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the certificates as JSON on stdout.")
def tls_cmd(ref: StackRef, within: float, as_json: bool) -> None:
    """When each certificate the stack uses expires: every entry of each declared CA bundle, the client
    certificates, and a local TLS estate's CA and broker certificates. Reads files only; connects to
    nothing. Exit 9 when one expires within --within days (the table is printed first); a certificate
    already expired in the declaration is refused with its date (exit 2) by every command."""
    from dr.base.errors import CertificateExpiring
    from dr.estate.estate import load_stack
    from dr.topology.cert_expiry import certificate_expiries, expiring

    entries = certificate_expiries(load_stack(ref), ref.state_dir)
    soon = expiring(entries, within)
    if as_json:
        rows = [{**e.model_dump(mode="json"), "within": e in soon} for e in entries]
        click.echo(json.dumps({"stack": ref.name, "within_days": within, "certificates": rows}, indent=2))
    elif not entries:
        click.echo(f"stack {ref.name}: no certificate (no TLS cluster, or the local estate's CA is not made yet)")
    else:
        click.echo(f"{'cluster':<10} {'use':<19} {'expires (UTC)':<17} {'days':>7}  subject — source")
        for e in entries:
            flag = f"  << within {within:g} days" if e in soon else ""
            click.echo(
                f"{e.cluster:<10} {e.use:<19} {e.not_after:%Y-%m-%d %H:%M} {e.days_left:>7.1f}  "
                f"{e.subject} — {e.source}{flag}"
            )
    if soon:
        first = soon[0]
        raise CertificateExpiring(
            f"{len(soon)} certificate(s) of stack {ref.name!r} expire within {within:g} days; the first: "
            f"{first.use} {first.subject} of cluster {first.cluster} on {first.not_after:%Y-%m-%d %H:%M} UTC",
            "renew them (runbooks/certificate-rotation.md: a new CA is added to the bundle before the brokers change)",
        )


# ------------------------------------------------------------------------------------ toolchain
@cli.command("toolchain")
@click.option("--json", "as_json", is_flag=True)
def toolchain_cmd(as_json: bool) -> None:
    """Show the pinned versions and where the cached builds are."""
    from dr.base.toolchain import kdr_home, toolchain, versions
    from verification.class_archive import archive_path, usable

    tc = toolchain()
    jars = [str(p) for p in tc.spark_kafka_jars]
    archive = archive_path(jars)
    info = {
        "versions": versions(),
        "cache": str(kdr_home()),
        "kafka_lib": str(tc.kafka_lib),
        "mm2_lib": str(tc.mm2_lib),
        "spark_kafka_jars": jars,
        "spark_class_archive": str(archive) if usable(archive) else "not built (make setup builds it)",
        "pulumi": str(tc.pulumi_bin / "pulumi"),
    }
    click.echo(json.dumps(info, indent=2) if as_json else "\n".join(f"{k}: {v}" for k, v in info.items()))


def _attach_commands() -> None:
    """verify/recover (verification/) and failover/status/drill (dr/failover/) join the group."""

    from dr.cli.adopt import adopt
    from dr.cli.controller import controller

    estate.add_command(adopt)
    for command in [*failover_commands(), *verification_commands(), controller]:
        cli.add_command(command)


_attach_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``drctl`` console script: the only place exceptions become exit codes.

    A :class:`DRError` exits with its documented code (:data:`dr.base.errors.EXIT_CODES`); a usage error
    exits as bad input; any other exception is a bug: it exits with :class:`InternalError`'s code
    and one paragraph naming the exception and the 0600 file holding its traceback (printed as
    well with ``KDR_DEBUG=1``), never the traceback itself or a secret.
    """

    try:
        cli.main(args=argv, standalone_mode=False)
    except DRError as exc:
        click.echo(f"error: {mask_secrets(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ConfigError.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 — the last resort: every other failure is reported, not dumped
        error = InternalError.from_exception(exc)
        if os.environ.get("KDR_DEBUG") == "1":
            click.echo(error.traceback_text, err=True, nl=False)
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()
