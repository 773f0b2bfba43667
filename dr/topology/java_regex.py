"""Link patterns checked by the engine that runs them: ``java.util.regex`` on this machine's JVM.

MirrorMaker 2 (dedicated or on Kafka Connect) compiles a link's topic and group patterns with Java's
regular expressions, while the product decides with Python's ``re`` which declared topics and groups a
link covers (lag, verification, offset translation). A pattern is usable only when both accept it and
give it the same meaning, so :func:`java_verdicts` runs a small Java checker
(``KdrRegexCheck.java``, compiled once with ``javac`` into ``$KDR_HOME/java-regex/<key>/``, the key
hashing the checker's source and the ``java`` binary) that compiles each pattern and matches it against
probe strings with ``Matcher.matches()`` — the call MirrorMaker 2's topic and group filters make.

Verdicts are cached per (pattern, probe) in that directory, so a stack already checked costs no JVM
start; a pattern made only of name characters, ``.`` and the quantifiers ``* + ?`` means the same
in both engines for every printable name and never reaches the JVM (:func:`same_in_both`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dr.base.errors import ToolchainError
from dr.base.toolchain import kdr_home

__all__ = ["JavaVerdict", "java_verdicts", "same_in_both"]

_CHECKER = "KdrRegexCheck"
_SOURCE = Path(__file__).with_name(f"{_CHECKER}.java")
_TIMEOUT_S = 60.0
_MAX_CACHED_PATTERNS = 5000
_SAME_IN_BOTH = re.compile(r"(?:[A-Za-z0-9_.-][*+?]?)*")
"""Literal name characters and ``.``, each optionally ``*``/``+``/``?``: identical in Java and Python
for names without line terminators (which topic names and printable group names never hold)."""


@dataclass(frozen=True)
class JavaVerdict:
    """What Java's regex engine says of one pattern: its syntax error, or which probes it fully matches."""

    error: str | None
    matches: dict[str, bool]


_memory: dict[str, dict[str, JavaVerdict]] = {}  # cache directory -> pattern -> verdict, per process
_lock = threading.Lock()


def same_in_both(pattern: str) -> bool:
    """True when ``pattern`` needs no JVM: both engines read it the same way (see :data:`_SAME_IN_BOTH`)."""
    return _SAME_IN_BOTH.fullmatch(pattern) is not None


def _cache_dir(java: str) -> Path:
    binary = Path(java).resolve()
    try:
        stamp = str(binary.stat().st_mtime_ns)
    except OSError:
        stamp = "?"
    digest = hashlib.sha256(_SOURCE.read_bytes() + f"\0{binary}\0{stamp}".encode()).hexdigest()[:16]
    return kdr_home() / "java-regex" / digest


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ToolchainError(
            "`java` is not on PATH: link patterns are checked with Java's regular expressions "
            "(the engine MirrorMaker 2 runs them with).",
            "install a JDK 17 (apt-get install openjdk-17-jdk-headless)",
        )
    return java


def _command(java: str, directory: Path) -> list[str]:
    """The checker's command: the compiled class when ``javac`` could build it, else a source launch."""
    fast = ["-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss8m"]
    if (directory / f"{_CHECKER}.class").is_file():
        return [java, *fast, "-cp", str(directory), _CHECKER]
    javac = shutil.which("javac")
    if javac is not None:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as build:
            done = subprocess.run(
                [javac, "-d", build, str(_SOURCE)], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
            )
            if done.returncode == 0:
                # its nested classes first: the main class's presence marks a complete build
                for nested in Path(build).glob(f"{_CHECKER}$*.class"):
                    os.replace(nested, directory / nested.name)
                os.replace(Path(build) / f"{_CHECKER}.class", directory / f"{_CHECKER}.class")
                return [java, *fast, "-cp", str(directory), _CHECKER]
    return [java, *fast, str(_SOURCE)]  # JDK 11+ single-file source launch (compiles in memory each run)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")


_Cache = dict[str, JavaVerdict]


def _run_checker(java: str, directory: Path, patterns: list[str], probes: list[str]) -> _Cache:
    lines = [f"probe {_b64(p)}" for p in probes] + [f"pattern {_b64(p)}" for p in patterns]
    command = _command(java, directory)
    try:
        done = subprocess.run(
            command,
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(
            f"the Java regex checker ({' '.join(command[-2:])}) did not run: {exc}",
            "check that `java -version` works (JDK 17), then run again",
        ) from None
    answers = done.stdout.splitlines()
    if done.returncode != 0 or len(answers) != len(patterns):
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise ToolchainError(
            f"the Java regex checker failed (exit {done.returncode}, {len(answers)} of {len(patterns)} answers): {tail}",
            f"check that `java -version` works (JDK 17); delete {directory} to rebuild the checker",
        )
    out: _Cache = {}
    for pattern, answer in zip(patterns, answers, strict=True):
        kind, _, rest = answer.partition(" ")
        if kind == "error":
            out[pattern] = JavaVerdict(base64.b64decode(rest).decode("utf-8"), {})
        else:
            out[pattern] = JavaVerdict(None, {p: bit == "1" for p, bit in zip(probes, rest, strict=True)})
    return out


def _load(path: Path) -> _Cache:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: _Cache = {}
    for pattern, entry in data.items() if isinstance(data, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("probes"), dict):
            error = entry.get("error")
            probes = {str(k): bool(v) for k, v in entry["probes"].items()}
            out[str(pattern)] = JavaVerdict(error if isinstance(error, str) else None, probes)
    return out


def _save(path: Path, verdicts: _Cache) -> None:
    items = list(verdicts.items())[-_MAX_CACHED_PATTERNS:]
    data = {pattern: {"error": v.error, "probes": v.matches} for pattern, v in items}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".verdicts-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written costs a JVM start next time, nothing else


def _missing(entry: JavaVerdict | None, probes: list[str]) -> bool:
    if entry is None:
        return True
    return entry.error is None and any(p not in entry.matches for p in probes)


def java_verdicts(patterns: Iterable[str], probes: Iterable[str]) -> dict[str, JavaVerdict]:
    """Java's verdict on each of ``patterns``: its syntax error, or which of ``probes`` it fully matches.

    Answers come from the cache when it has them; the rest from one run of the Java checker.
    Raises :class:`ToolchainError` when no JVM can run it.
    """
    wanted = list(dict.fromkeys(patterns))
    probe_list = list(dict.fromkeys(probes))
    if not wanted:
        return {}
    with _lock:
        java = _java()
        directory = _cache_dir(java)
        cache = _memory.setdefault(str(directory), {})
        if not cache:
            cache.update(_load(directory / "verdicts.json"))
        todo = [p for p in wanted if _missing(cache.get(p), probe_list)]
        if todo:
            for pattern, fresh in _run_checker(java, directory, todo, probe_list).items():
                old = cache.get(pattern)
                if old is not None and fresh.error is None:
                    fresh = JavaVerdict(None, {**old.matches, **fresh.matches})
                cache[pattern] = fresh
            _save(directory / "verdicts.json", {**_load(directory / "verdicts.json"), **cache})
        found = {pattern: cache[pattern] for pattern in wanted}
    return {
        pattern: JavaVerdict(v.error, {} if v.error is not None else {p: v.matches[p] for p in probe_list})
        for pattern, v in found.items()
    }
