"""The environment of the long-running processes the product starts: brokers, MirrorMaker 2, Connect
workers, the links' watchdogs, HAProxy.

They outlive the ``drctl`` that started them and anybody on the machine can read what they were started
with (``/proc/<pid>/environ`` for the same user, core dumps, crash reports), so they get only what a
process needs to run — never the operator's Pulumi passphrase, the backend URL (which carries the team
database's password), cloud credentials or anything else of the operator's shell. Their own
configuration and credentials reach them through their files (0600, in the stack's state).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["child_env"]

_KEPT = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "JAVA_HOME", "PYTHONPATH",
     "VIRTUAL_ENV", "LD_LIBRARY_PATH"}
)  # fmt: skip
"""What any process needs: where programs and libraries are, who and where it is, its locale and time zone."""

_KEPT_PREFIXES = ("LC_", "KDR_")
"""The locale's parts, and the product's own settings (a watchdog runs the product's code)."""

_SECRET = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|CREDENTIAL|_URL$", re.IGNORECASE)
"""Never passed on, even under a kept prefix."""


def child_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a long-running child: the kept variables of ``base`` (default: this process's
    environment), then ``extra`` (what the caller knows the child needs)."""
    source = os.environ if base is None else base
    env = {
        k: v
        for k, v in source.items()
        if (k in _KEPT or k.startswith(_KEPT_PREFIXES)) and not (k not in _KEPT and _SECRET.search(k))
    }
    env.update(extra or {})
    return env
