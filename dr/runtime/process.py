"""JVM processes with pid files: start detached, check, stop cleanly (no orphan JVM)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path

from dr.base.child_env import child_env
from dr.base.errors import ClusterError, ConfigError, PortInUse, mask_secrets
from dr.kafka.connect_rest import root_cause

# ERROR records of Kafka Connect (MirrorMaker 2 runs on it) after which a connector, a task or the
# worker stays down until someone acts: a start-up wait can stop there instead of timing out.
_FATAL = re.compile(
    r"\bERROR\b.*?(Error while starting connector|Failed to start connector|Failed to start task"
    r"|Task threw an uncaught and unrecoverable exception|Stopping due to error"
    r"|Uncaught exception in herder work thread)"
)
_RECORD = re.compile(r"\[?\d")
"""A log record's first line (slf4j-simple ``<ms> [thread] LEVEL``, log4j ``[2026-...``); other lines
belong to the previous record's stack trace."""
_SUBJECTS = (
    (re.compile(r"WorkerConnector\{id=([^}]+)\}"), "connector"),
    (re.compile(r"connector '([^']+)'"), "connector"),
    (re.compile(r"Worker\w*Task\{id=([^}]+)\}"), "task"),
    (re.compile(r"Failed to start task (\S+)"), "task"),
)


def fatal_cause(log_text: str, *, connectors: bool = True) -> str | None:
    """The first fatal start-up error of a Kafka Connect / MirrorMaker 2 log, on one line: what
    failed and the root exception (``connector MirrorSourceConnector: java.util.regex.Pattern...``);
    None when the log holds no such record. ``connectors=False`` looks only at the worker's own
    errors (a Connect worker is up even when a connector it runs failed). Secrets are masked."""
    for subject, cause in _standing_failures(log_text):
        if connectors or subject == "the worker":
            return f"{subject}: {cause}"
    return None


def dead_tasks(log_text: str) -> dict[str, str]:
    """Per task id (``MirrorSourceConnector-1``), the root cause of each task a Kafka Connect / MirrorMaker 2
    log records as failed for good — "uncaught and unrecoverable", or failed to start — and does not start
    again later (pure). Connect never restarts such a task itself: it stays down while the process runs."""
    out: dict[str, str] = {}
    for subject, cause in _standing_failures(log_text):
        kind, _, name = subject.partition(" ")
        if kind == "task":
            out.setdefault(name, cause)
    return out


def _standing_failures(log_text: str) -> Iterator[tuple[str, str]]:
    """``(subject, root cause)`` of each fatal record not superseded by a later start of its subject, in
    log order; the subject is ``connector <name>``, ``task <id>`` or ``the worker``; secrets masked."""
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        match = _FATAL.search(line)
        if match is None:
            continue
        subject = next((f"{kind} {m.group(1)}" for rx, kind in _SUBJECTS if (m := rx.search(line))), "the worker")
        if _superseded(subject, lines[i + 1 :]):
            continue
        trace = []
        for follow in lines[i + 1 :]:
            if _RECORD.match(follow):
                break
            trace.append(follow)
        yield subject, mask_secrets(root_cause(chr(10).join(trace)) or match.group(1))


def _superseded(subject: str, later: list[str]) -> bool:
    """True when a later record starts ``subject`` again: MirrorMaker 2 first starts the connectors
    of the config it stored last time, then writes its new config and restarts them."""
    kind, _, name = subject.partition(" ")
    marks: tuple[str, ...]
    if kind == "connector":
        marks = (f"starting connector {name}".lower(), f"restarting connector {name}".lower())
    elif kind == "task":
        marks = (f"starting task {name}".lower(),)
    else:
        return False
    return any(mark in line.lower() for line in later for mark in marks)


class FatalWatch:
    """Reports a fatal start-up record only once it has stood for ``settle`` seconds without a later
    restart of what failed (a stale config's failure is superseded within a second or so)."""

    def __init__(self, settle: float = 3.0, *, connectors: bool = True) -> None:
        self.settle = settle
        self.connectors = connectors
        self._cause: str | None = None
        self._since = 0.0

    def check(self, log_text: str) -> tuple[str | None, bool]:
        """(cause, final): the current fatal cause, and whether it has stood long enough to report."""
        cause = fatal_cause(log_text, connectors=self.connectors)
        now = time.monotonic()
        if cause != self._cause:
            self._cause, self._since = cause, now
        return cause, cause is not None and now - self._since >= self.settle


def last_exception(log_text: str) -> str | None:
    """The last exception a log names (``class: message``), masked; None when it names none."""
    cause = root_cause(log_text)
    return mask_secrets(cause) if cause else None


JVM_PROFILES: dict[str, tuple[str, ...]] = {
    "footprint": ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"),
    "throughput": ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"),
}
"""The JVM options of the product's local JVMs (brokers, MirrorMaker 2, Connect workers, Kafka's tools), by
profile. ``footprint`` (the default) suits the local estate — the demo and the test bed, many small JVMs on a
laptop's cores: the client compiler alone and the serial collector use a fraction of the CPU that C2's
compilations and G1's concurrent threads take while a JVM warms up (a planned failover's module: 88 s of CPU
against 162 s, same wall time or less). ``throughput`` (G1 and the optimising compiler) suits a local estate
that carries sustained load for long. Chosen with ``KDR_JVM_PROFILE``; external clusters are not affected."""


def jvm_profile(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The options of the profile ``KDR_JVM_PROFILE`` names (default ``footprint``); ConfigError for another name."""
    name = (os.environ if env is None else env).get("KDR_JVM_PROFILE", "").strip() or "footprint"
    if name not in JVM_PROFILES:
        raise ConfigError(
            f"KDR_JVM_PROFILE={name!r} is not a JVM profile",
            f"set it to one of {', '.join(sorted(JVM_PROFILES))}, or unset it (footprint)",
        )
    return JVM_PROFILES[name]


def java_command(
    java: str,
    lib_dirs: Sequence[Path],
    main: str,
    args: Sequence[str],
    heap_mb: int = 384,
    extra_jvm: Sequence[str] = (),
    *,
    crash_dir: Path,
    argfile: Path | None = None,
) -> list[str]:
    """The command line for ``main`` with every jar of ``lib_dirs`` on the classpath (and the Kafka
    JVMs' class-data archive when there is one: :mod:`dr.runtime.class_archive`) (pure).

    A crash log (``hs_err_pid<pid>.log``, which repeats the command line and the JVM's state) goes to
    ``crash_dir``, the process's own private directory — never the temp or working directory. With
    ``argfile`` the command line ends with ``@<argfile>`` instead of ``main`` and ``args``: the Java
    launcher reads them from that file (written by the caller with :func:`argfile_text`, mode 0600),
    so an argument holding a secret is never visible in ``ps``.
    """
    from dr.runtime.class_archive import java_options

    classpath = os.pathsep.join(str(d / "*") for d in lib_dirs)
    return [
        java,
        f"-Xms{heap_mb // 2}m",
        f"-Xmx{heap_mb}m",
        *jvm_profile(),
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        "-Dslf4j.internal.verbosity=WARN",
        f"-XX:ErrorFile={crash_dir / 'hs_err_pid%p.log'}",
        *java_options(lib_dirs, main),
        *extra_jvm,
        "-cp",
        classpath,
        *([f"@{argfile}"] if argfile is not None else [main, *args]),
    ]


def argfile_text(words: Sequence[str]) -> str:
    """``words`` as a Java launcher argument file (``java @file``) reads them back, one per line (pure):
    each quoted, its backslashes and double quotes escaped."""
    return "".join(
        '"' + w.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"\n'
        for w in words
    )


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if needed and make it 0700: the product's own directory for a
    process's configuration, secrets and crash logs. Return it."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def ensure_ports_free(ports: Sequence[int], owner: str, grace: float = 10.0) -> None:
    """Raise :class:`PortInUse` naming the first port still taken after ``grace`` seconds (a JVM just
    killed or shutting down releases its ports within a few)."""
    for port in ports:
        if not port_free(port) and not wait_until(partial(port_free, port), grace, interval=0.25):
            raise PortInUse(
                f"port 127.0.0.1:{port} needed by {owner} is already in use by another process.",
                f"stop that process (`ss -ltnp 'sport = :{port}'` shows it) or choose another base_port",
            )


def pid_alive(pid: int) -> bool:
    """True when ``pid`` is a live (non-zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split(" ", 1)[0] != "Z"
    except OSError:
        return False


class JvmProcess:
    """One detached JVM whose pid lives in ``pid_file`` so any later process can stop it."""

    def __init__(self, name: str, pid_file: Path, log_file: Path) -> None:
        self.name = name
        self.pid_file = pid_file
        self.log_file = log_file
        self._popen: subprocess.Popen[bytes] | None = None  # set when this object started the JVM

    @property
    def pid(self) -> int | None:
        """The recorded pid if that process is still alive, else None."""
        popen = self._popen
        if popen is not None:
            # Our own child: reliable even before exec() has replaced its command line.
            if popen.poll() is None:
                return popen.pid
            self._popen = None  # it ended; another process (a link's watchdog) may have started it again
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            # The pid file is gone with its directory, and the JVM may have recreated that directory
            # (a broker writing a segment): look for our JVM itself.
            return self._find()
        return pid if pid_alive(pid) and self._is_ours(pid) else None

    def _find(self) -> int | None:
        """Our JVM when its pid file is gone (its directory deleted under it): the live process whose
        command line carries both our marker and a file of our directory (its configuration)."""
        marker = f"-Dkdr.process={self.name}".encode()
        home = str(self.pid_file.parent).encode() + b"/"
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline.split(b"\0") and home in cmdline and pid_alive(int(entry.name)):
                return int(entry.name)
        return None

    def _is_ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return f"-Dkdr.process={self.name}".encode() in cmdline

    def alive(self) -> bool:
        """True when the process is running."""
        return self.pid is not None

    def start(self, command: list[str], env: dict[str, str] | None = None) -> int:
        """Start detached (own session) unless already running, with only the environment it needs
        (:func:`dr.base.child_env.child_env` plus ``env``); return the pid."""
        existing = self.pid
        if existing:
            return existing
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        # The marker lets stop()/pid() recognise our JVM even after pid reuse.
        idx = command.index("-cp")
        command = [*command[:idx], f"-Dkdr.process={self.name}", *command[idx:]]
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=child_env(env),  # never the operator's passphrase or backend URL
            )
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.write_text(str(proc.pid))
        self._popen = proc  # keep a handle so the child is reaped if we are its parent
        return proc.pid

    def _gone(self, pid: int) -> bool:
        """True once ``pid`` no longer runs (our own child is reaped first, so it is no zombie)."""
        if self._popen is not None:
            self._popen.poll()
        return not pid_alive(pid)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``timeout``; wait until gone."""
        pid = self.pid
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return
        os.kill(pid, signal.SIGTERM)
        if not wait_until(lambda: self._gone(pid), timeout):
            self.kill()
            return
        self.pid_file.unlink(missing_ok=True)
        self._popen = None

    def kill(self) -> None:
        """SIGKILL: the crash a failure test wants. Waits until the process is gone."""
        pid = self.pid
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        if not wait_until(lambda: self._gone(pid), 30):
            raise ClusterError(f"{self.name} (pid {pid}) survived SIGKILL.", "check the machine's process table")
        self.pid_file.unlink(missing_ok=True)
        self._popen = None

    def log_since(self, offset: int) -> str:
        """The log from byte ``offset`` on (what this start wrote), decoded leniently."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_size(self) -> int:
        """The log's current size in bytes (0 when absent): where a new start's lines begin."""
        try:
            return self.log_file.stat().st_size
        except OSError:
            return 0

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the process log (for error messages)."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
