"""requirements.lock (scripts/lock.sh) holds every pin of pyproject.toml at the same version, and a sha256 for
every package: set-up installs from it with ``pip --require-hashes``, so a dependency changed in pyproject.toml
without a new lock fails here, not on a fresh machine."""

from __future__ import annotations

import re
import tomllib

from tests import REPO_ROOT


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def _locked() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of each package in the lock."""
    text = (REPO_ROOT / "requirements.lock").read_text()
    found: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block)
        if m:
            found[_name(m[1])] = (m[2], block.count("--hash=sha256:"))
    return found


def _pins() -> dict[str, str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        name, version = spec.split("==")
        pins[_name(name)] = version
    for line in (REPO_ROOT / "toolchain" / "python-bootstrap.in").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


def test_every_pin_of_pyproject_is_locked_at_its_version() -> None:
    locked = _locked()
    wrong = {n: (v, locked.get(n, ("missing", 0))[0]) for n, v in _pins().items() if locked.get(n, ("", 0))[0] != v}
    assert not wrong, f"pyproject.toml and requirements.lock disagree (run scripts/lock.sh): {wrong}"


def test_every_locked_package_carries_its_hashes() -> None:
    locked = _locked()
    assert len(locked) > len(_pins()), "the lock holds the dependencies' dependencies too"
    unhashed = [n for n, (_, hashes) in locked.items() if hashes == 0]
    assert not unhashed, unhashed
