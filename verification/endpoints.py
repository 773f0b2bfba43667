"""Turn command-line choices into sides: a stack's cluster (resolved by the caller), explicit bootstrap + credentials, or an archive.

Credentials files are JSON ``{"username": ..., "password": ...}`` (optionally
``"security_protocol"`` and ``"sasl_mechanism"``, and over TLS ``"ssl_ca_location"`` — the CA bundle's
PEM path — with, for mutual TLS, ``"ssl_certificate_location"``, ``"ssl_key_location"`` and
``"ssl_keystore_location"``, and ``"ssl_hostname_verification": false`` to turn the host check off) and
must be readable by their owner only (0600). For an OAUTHBEARER cluster (``"sasl_mechanism": "OAUTHBEARER"``,
or a report's side recorded so) ``username`` is the client id, ``password`` its client secret, and
``"oauth_token_endpoint"`` the identity provider's token URL (``https``, or ``http`` on a loopback address),
with ``"oauth_scope"``, ``"oauth_audience"`` and, for an ``https`` endpoint, ``"oauth_ca_location"`` (default:
``"ssl_ca_location"``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from dr.base.errors import ConfigError
from dr.kafka.client import Endpoint
from dr.kafka.oauth import OAUTHBEARER, OAuthSettings, token_endpoint_flaw
from dr.kafka.tls import TlsFiles
from verification.sides import ArchiveSide, KafkaSide, Side

__all__ = ["StackResolver", "endpoint_from_file", "load_credentials", "parse_cutoff", "resolve_side"]

#: ``(stack, cluster name) → Endpoint``: how the command line resolves a cluster of a stack.
StackResolver = Callable[[str, str], Endpoint]


def load_credentials(path: Path | str) -> dict[str, str]:
    """Read a credentials file, refusing one that other users can read."""
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError as exc:
        raise ConfigError(
            f"credentials file {path} does not exist.", 'write {"username": ..., "password": ...} to it with mode 0600'
        ) from exc
    if mode & 0o077:
        raise ConfigError(
            f"credentials file {path} is readable by other users (mode {oct(mode)}).", f"run `chmod 600 {path}`"
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"credentials file {path} is not valid JSON ({exc.msg}).", 'write {"username": ..., "password": ...}'
        ) from exc
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("username"), str)
        or not isinstance(data.get("password"), str)
    ):
        raise ConfigError(
            f"credentials file {path} needs string fields 'username' and 'password'.",
            'write {"username": ..., "password": ...}',
        )
    return {k: str(v) for k, v in data.items()}


def endpoint_from_file(
    bootstrap: str,
    path: Path | str,
    *,
    security_protocol: str = "SASL_PLAINTEXT",
    sasl_mechanism: str = "SCRAM-SHA-512",
) -> Endpoint:
    """An endpoint for ``bootstrap`` with the user and password of a credentials file.

    The file's ``security_protocol``/``sasl_mechanism`` win over the defaults given here.
    """
    creds = load_credentials(path)
    mechanism = creds.get("sasl_mechanism", sasl_mechanism)
    return Endpoint(
        bootstrap,
        creds["username"],
        creds["password"],
        creds.get("security_protocol", security_protocol),
        mechanism,
        _tls(creds),
        oauth=_oauth(path, creds) if mechanism.upper() == OAUTHBEARER else None,
    )


def _oauth(path: Path | str, creds: dict[str, str]) -> OAuthSettings:
    """The identity provider of an OAUTHBEARER credentials file; its token URL named when missing or not safe."""
    url = creds.get("oauth_token_endpoint") or ""
    fix = (
        'add "oauth_token_endpoint": "<the identity provider\'s token URL>" (and "oauth_scope", "oauth_audience", '
        '"oauth_ca_location" as the cluster needs), "username" being the client id and "password" its secret; '
        "or name the cluster in its stack with --stack"
    )
    if not url:
        raise ConfigError(
            f"credentials file {path} is for an OAUTHBEARER cluster but has no oauth_token_endpoint.", fix
        )
    ca = creds.get("oauth_ca_location") or creds.get("ssl_ca_location") or None
    flaw = token_endpoint_flaw(url, has_ca=ca is not None)
    if flaw in ("not-a-url", "plain-http"):
        raise ConfigError(
            f"credentials file {path}: oauth_token_endpoint {url} is neither https nor http on a loopback address "
            "(the client secret travels in the request).",
            "use the identity provider's https URL, with its CA in oauth_ca_location",
        )
    if flaw == "no-ca":
        raise ConfigError(
            f"credentials file {path}: no CA for the identity provider at {url} (the product never trusts this "
            "machine's system roots).",
            'add "oauth_ca_location": "<the provider\'s PEM CA bundle>" (default: the file\'s ssl_ca_location)',
        )
    return OAuthSettings(url, creds.get("oauth_scope") or None, creds.get("oauth_audience") or None, ca)


def _tls(creds: dict[str, str]) -> TlsFiles | None:
    keys = ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location", "ssl_keystore_location")
    if not any(creds.get(k) for k in (*keys, "ssl_hostname_verification")):
        return None
    ca, cert, key, keystore = (creds.get(k) or None for k in keys)
    verify = str(creds.get("ssl_hostname_verification", "true")).lower() != "false"
    return TlsFiles(ca, cert, key, keystore, hostname_verification=verify)


def resolve_side(
    role: str,
    *,
    stack: str | None,
    name: str | None,
    bootstrap: str | None,
    credentials: Path | None,
    archive: Path | None,
    stack_endpoint: StackResolver | None = None,
) -> Side:
    """One side from the flags given for it (``role`` is 'source' or 'target', for messages).

    A cluster named in a stack is reached through ``stack_endpoint(stack, name)``: resolving a
    stack belongs to the command line (``drctl``); without a resolver only explicit bootstrap +
    credentials or an archive name a side.
    """
    chosen = [x for x in (bootstrap, archive) if x]
    if len(chosen) > 1:
        raise ConfigError(f"--{role}-bootstrap and --{role}-archive both given.", f"keep one of them for the {role}")
    if archive:
        return ArchiveSide(path=Path(archive), name=name)
    if bootstrap:
        if credentials is None:
            raise ConfigError(
                f"--{role}-bootstrap needs credentials.",
                f"pass --credentials FILE (or --{role}-credentials FILE), a 0600 JSON file "
                '{"username": ..., "password": ...}',
            )
        return KafkaSide(endpoint=endpoint_from_file(bootstrap, credentials), name=name, stack=stack)
    if stack and name:
        if stack_endpoint is None:
            raise ConfigError(
                "resolving clusters by stack is not available here (only `drctl verify` reads stack files).",
                f"pass --{role}-bootstrap HOST:PORT and --credentials FILE instead",
            )
        return KafkaSide(endpoint=stack_endpoint(stack, name), name=name, stack=stack)
    raise ConfigError(
        f"no {role} given.",
        f"pass --stack STACK --{role} NAME, or --{role}-bootstrap HOST:PORT with --credentials FILE, "
        f"or --{role}-archive PATH",
    )


_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}")


def parse_cutoff(text: str | None) -> int | None:
    """A cut-off as epoch milliseconds.

    Accepts epoch milliseconds, epoch seconds (numbers below 10^11 are taken as seconds) or
    ISO-8601 (``2025-05-01T12:00:00Z``; without a zone it is UTC).
    """
    if text is None or text == "":
        return None
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        value = float(text)
        return int(value * 1000) if value < 1e11 else int(value)
    if _ISO.match(text):
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ConfigError(
                f"--cutoff {text!r} is not a valid ISO-8601 time ({exc}).",
                "write it like 2025-05-01T12:00:00Z or as epoch milliseconds",
            ) from exc
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return int(dt.timestamp() * 1000)
    raise ConfigError(
        f"--cutoff {text!r} is neither epoch milliseconds nor ISO-8601.",
        "write it like 2025-05-01T12:00:00Z or as epoch milliseconds",
    )
