"""``drctl estate adopt``: a stack file proposal from what a running cluster holds.

The reading (:func:`dr.kafka.live.read_live`, :func:`dr.runtime.quota_reader.read_quotas`) is kept apart
from the derivation (:mod:`dr.topology.adoption`, pure); this module only wires them and writes the text.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from dr.base.errors import ConfigError
from dr.base.stackref import StackRef
from dr.cli.failover import progress
from dr.cli.options import STACK

__all__ = ["adopt"]


def _header(ref: StackRef, cluster: str, bootstrap: str, counts: str, notes: list[str], missing: list[str]) -> str:
    lines = [
        f"# Proposed by `drctl estate adopt --stack {ref.name} --from {cluster}` from cluster {cluster} "
        f"({bootstrap}) at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: {counts}.",
        "# Review it, then make it the stack file (docs/production/adopt.md).",
    ]
    if notes:
        lines.append("# Before the first `pulumi up`:")
        lines += [f"#   - {note}" for note in notes]
    if missing:
        from dr.topology.adoption import KEPT

        lines.append(f"# Not expressed by this stack file ({KEPT}):")
        lines += [f"#   - {item}" for item in missing]
    else:
        lines.append("# Not expressed by this stack file: nothing.")
    return "\n".join(" ".join(line.split("\n")) for line in lines) + "\n"


@click.command("adopt")
@click.option(
    "--stack",
    "ref",
    type=STACK,
    required=True,
    help="The stack whose file declares the cluster (how to reach it, its admin credentials as secrets).",
)
@click.option("--from", "cluster_name", required=True, help="The cluster of the stack to read, e.g. A.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the proposal to this file (default: stdout). An existing file is refused without --force.",
)
@click.option("--force", is_flag=True, help="Overwrite the --out file when it exists.")
def adopt(ref: StackRef, cluster_name: str, out: Path | None, force: bool) -> None:
    """Read a running cluster and propose the stack file that declares what it holds.

    Topics (partitions, replication factor, topic-level configurations), one application per principal from
    its ACLs (produces, consumes, prefixes kept as prefixes, consumer group), the SCRAM users, the user
    quotas and the default user quota — in the stack file of --stack, its clusters, links and comments
    kept. What a stack file cannot express (DENY rules, ACLs limited to a host, wildcard principals, rights
    beyond an application's role, client-id and IP quotas…) is listed with the reason, as comments at the
    top and on stderr. Reads only: nothing on the cluster changes. Exit 2 for an --out file that exists
    (without --force) or an unknown cluster, 4 when the cluster cannot be reached, 5 when its admin may not
    describe topics, configurations, ACLs, users or quotas — nothing is written then.
    """
    from dr.base.files import write_atomic
    from dr.estate.estate import Estate, load_stack
    from dr.kafka.live import read_live
    from dr.topology import Kind
    from dr.topology.adoption import adopted_topology, derive
    from dr.topology.stackfile import render_stack_config

    if out is not None and out.exists() and not force:
        raise ConfigError(
            f"{out} exists; the proposal was not written.",
            "name another --out file, or pass --force to replace it",
        )
    topology = load_stack(ref)
    cluster = topology.cluster(cluster_name)
    endpoint = Estate(topology, ref.made_state_dir()).endpoint(cluster_name)
    t0 = time.monotonic()
    progress(f"reading cluster {cluster_name} ({endpoint.bootstrap}) as {endpoint.username}")
    live = read_live(endpoint)
    if cluster.kind is not Kind.CONFLUENT_CLOUD:  # Confluent Cloud keeps no client quotas a user can set
        from dr.runtime.quota_reader import read_quotas

        live.quotas = read_quotas(endpoint)
    progress(
        f"read {len(live.topics)} topics ({len(live.internal_topics)} internal left out), {len(live.acls)} ACLs, "
        f"{len(live.scram_users)} SCRAM users, {len(live.quotas)} quotas in {time.monotonic() - t0:.1f}s"
    )
    p = topology.principals
    own = {
        p.admin: f"{p.admin!r} is the stack's admin principal",
        p.replicator: f"{p.replicator!r} is the stack's replicator principal",
    }
    for c in topology.clusters:
        if c.admin_username:
            own.setdefault(c.admin_username, f"{c.admin_username!r} is cluster {c.name}'s admin user")
    proposed, adoption = adopted_topology(topology, derive(live, own=own))
    text = render_stack_config(ref.existing_stack_file(), proposed)
    quotas = sum(1 for a in adoption.applications if a.quota) + (adoption.default_quota is not None)
    counts = f"{len(adoption.topics)} topics, {len(adoption.applications)} applications, {quotas} quotas"
    missing = [u.text() for u in adoption.unexpressed]
    document = _header(ref, cluster_name, endpoint.bootstrap, counts, adoption.notes, missing) + text
    if out is None:
        click.echo(document, nl=False)
    else:
        write_atomic(out, document, mode=0o644)  # ciphertext only: the secrets stay `secure:` values
        progress(f"proposal written to {out}")
    progress(
        f"proposal: {counts}; {len(missing)} item(s) not expressed, {len(adoption.notes)} step(s) before `pulumi up`"
    )
    for item in missing:
        progress(f"  not expressed: {item}")
