"""The rules of a cluster that authenticates with OAuth 2.0 tokens (``sasl_mechanism: OAUTHBEARER``, issue 49).

Checked with every other rule (:mod:`dr.topology.validation`) before anything runs, each missing piece named
on its own: the ``oauth`` block, its token endpoint (``https``, or ``http`` on a loopback address only: the
client secrets travel in the request), a CA for an ``https`` endpoint (the product never trusts a machine's
system roots), the admin's client and its secret, the replicator's client and its secret on a cluster a link
reads or writes (its principal must be ``principals.replicator``, whose ACLs the program writes), and one
client per application, whose principal must be the application's name (so its ACLs are those of its role).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from dr.kafka.oauth import OAUTHBEARER, token_endpoint_flaw
from dr.topology.kinds import Kind

if TYPE_CHECKING:
    from dr.topology.model import Cluster, OAuth, Tls, Topology

__all__ = ["OAUTHBEARER", "oauth_problems"]

Problem = tuple[str, str, str]
_SECRET_FIX = "set it as a secret: `pulumi config set --path --secret 'kafka-dr:{path}' <secret>`"


def oauth_problems(t: Topology) -> Iterator[Problem]:
    """(field path, problem, fix) of every broken OAUTHBEARER rule of ``t``'s clusters."""
    linked = {end for link in t.links for end in (link.source, link.target)}
    for i, c in enumerate(t.clusters):
        at = f"clusters[{i}]"
        if c.sasl_mechanism != OAUTHBEARER:
            if c.oauth is not None:
                yield (
                    f"{at}.oauth",
                    f"is set on cluster {c.name!r}, whose sasl_mechanism is {c.sasl_mechanism}",
                    "set sasl_mechanism: OAUTHBEARER to log in with tokens, or remove oauth",
                )
            continue
        if c.kind != Kind.EXTERNAL:
            yield (
                f"{at}.sasl_mechanism",
                f"OAUTHBEARER is declared on {c.kind} cluster {c.name!r}; only external clusters log in with "
                "tokens (local clusters run SCRAM with credentials the product makes)",
                "use kind: external with the brokers' bootstrap_servers, or remove sasl_mechanism",
            )
            continue
        for field in ("admin_username", "admin_password"):
            if getattr(c, field) is not None:
                yield (
                    f"{at}.{field}",
                    f"is set on cluster {c.name!r}, whose clients log in with OAUTHBEARER tokens, not a password",
                    "remove it: the admin logs in as oauth.admin (client id and secret)",
                )
        o = c.oauth
        if o is None:
            yield (
                f"{at}.oauth",
                f"cluster {c.name!r} declares OAUTHBEARER but no oauth block: the token endpoint and the admin's "
                "client are missing",
                "declare oauth.token_endpoint and oauth.admin (client_id, and client_secret as a secret)",
            )
            continue
        yield from _endpoint_problems(f"{at}.oauth", c, o)
        yield from _client_problems(f"{at}.oauth", t, c, o, c.name in linked)


def _endpoint_problems(at: str, c: Cluster, o: OAuth) -> Iterator[Problem]:
    if not o.token_endpoint:
        yield (
            f"{at}.token_endpoint",
            f"cluster {c.name!r}: the identity provider's token endpoint is missing",
            "set it to the provider's token URL (Keycloak: https://<host>/realms/<realm>/protocol/openid-connect/token)",
        )
    else:
        flaw = token_endpoint_flaw(o.token_endpoint, has_ca=_has_ca(o) or (c.tls is not None and _has_ca_of(c.tls)))
        if flaw == "not-a-url":
            yield (
                f"{at}.token_endpoint",
                f"{o.token_endpoint!r} (cluster {c.name!r}) is not an http(s) URL",
                "give the full URL of the identity provider's token endpoint",
            )
        elif flaw == "plain-http":
            yield (
                f"{at}.token_endpoint",
                f"{o.token_endpoint!r} (cluster {c.name!r}) is plain http to another machine: every client "
                "secret would cross the network unencrypted",
                "use the provider's https URL (http is accepted on a loopback address only)",
            )
        elif flaw == "no-ca":
            yield (
                f"{at}.tls.ca_file",
                f"cluster {c.name!r}: the https token endpoint has no CA declared (the product never trusts "
                "a machine's system roots)",
                "set oauth.tls.ca_file (or ca_pem) to the CA that signed the identity provider's certificate "
                "(or the cluster's tls.ca_file, when the same CA signed both)",
            )
    if o.tls is not None and (o.tls.has_client_certificate or o.tls.has_client_key):
        yield (
            f"{at}.tls",
            f"cluster {c.name!r}: oauth.tls declares a client certificate or key; the identity provider is "
            "reached with the client secret, only its CA is used",
            "keep ca_file/ca_pem and hostname_verification in oauth.tls, remove the certificate and key",
        )


def _client_problems(at: str, t: Topology, c: Cluster, o: OAuth, linked: bool) -> Iterator[Problem]:
    index = f"{at}".removeprefix("clusters")
    if o.admin is None:
        yield (
            f"{at}.admin",
            f"cluster {c.name!r}: the admin's client identity is missing",
            "declare oauth.admin.client_id and, as a secret, oauth.admin.client_secret (a super user of the brokers)",
        )
    elif o.admin.client_secret is None:
        yield (f"{at}.admin.client_secret", f"cluster {c.name!r}: the admin's client secret is missing",
               _SECRET_FIX.format(path=f"clusters{index}.admin.clientSecret"))  # fmt: skip
    if linked:
        replicator = t.principals.replicator
        if o.replicator is None:
            yield (
                f"{at}.replicator",
                f"cluster {c.name!r} is an end of a link but the replicator's client identity is missing",
                f"declare oauth.replicator.client_id (its tokens' principal must be {replicator!r}) and, as a "
                "secret, oauth.replicator.client_secret",
            )
        else:
            if o.replicator.client_secret is None:
                yield (f"{at}.replicator.client_secret", f"cluster {c.name!r}: the replicator's client secret is missing",
                       _SECRET_FIX.format(path=f"clusters{index}.replicator.clientSecret"))  # fmt: skip
            if o.replicator.kafka_principal != replicator:
                yield (
                    f"{at}.replicator.principal",
                    f"cluster {c.name!r}: the replicator's tokens carry principal {o.replicator.kafka_principal!r}, "
                    f"but the ACLs the program writes name principals.replicator {replicator!r}",
                    f"set oauth.replicator.principal to {replicator!r} (and have the identity provider put it in the "
                    "claim the brokers read), or rename principals.replicator",
                )
        if o.admin is not None and o.replicator is not None and o.admin.client_id == o.replicator.client_id:
            yield (
                f"{at}.replicator.client_id",
                f"cluster {c.name!r}: the replicator uses the admin's client {o.admin.client_id!r}",
                "register a client of its own for the replicator, so that its rights stay its ACLs",
            )
    apps = {app.name for app in t.principals.applications}
    for name in sorted(apps - set(o.applications)):
        yield (
            f"{at}.applications.{name}",
            f"cluster {c.name!r}: application {name!r} has no client identity",
            f"declare oauth.applications.{name}.client_id (its tokens' principal must be {name!r}); its secret "
            "may stay with the application team",
        )
    for name, client in sorted(o.applications.items()):
        if name not in apps:
            yield (
                f"{at}.applications.{name}",
                f"cluster {c.name!r}: {name!r} is not a declared application",
                "name an application of principals.applications, or remove this identity",
            )
        elif client.kafka_principal != name:
            yield (
                f"{at}.applications.{name}.principal",
                f"cluster {c.name!r}: application {name!r}'s tokens carry principal {client.kafka_principal!r}, "
                f"but its ACLs name {name!r}",
                f"set principal: {name} (and have the identity provider put it in the claim the brokers read)",
            )


def _has_ca(o: OAuth) -> bool:
    return o.tls is not None and _has_ca_of(o.tls)


def _has_ca_of(tls: Tls) -> bool:
    return bool(tls.ca_file or tls.ca_pem)
