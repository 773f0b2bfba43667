"""`pulumi up` of the repository's program, as a Pulumi user runs it: real engine, real Kafka provider,
real brokers and MirrorMaker 2 — and ``drctl estate up/preview/status/down`` on the same stack, the
Automation API's way to the same engine: roles become processes, ACLs follow roles.

One project directory for the module (``Pulumi.yaml`` of the repository, ``stacks/`` linked in,
a stack file ``Pulumi.pt.yaml`` on its own ports), the local ``file://`` backend and passphrase
secrets. The tests are ordered steps on one estate (file order); each leaves the estate as the next
expects, and a step whose predecessor failed says so instead of failing on a state it did not expect.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from dr.base.pulumi_env import pulumi_env
from dr.base.toolchain import toolchain
from dr.estate.estate import Estate
from dr.runtime.process import pid_alive, wait_until
from tests import REPO_ROOT, processes
from tests.integration.helpers import StackEnv, consume_all, drctl, produce
from tests.integration.ports import windows

STACK = "pt"


class Project:
    """A Pulumi project directory (the test stack's :class:`StackEnv`) and the environment `pulumi` runs with
    there."""

    def __init__(self, root: Path, stack: str = STACK) -> None:
        self.root = root
        self.stack_env = StackEnv(root, stack)
        self.state = Path(self.stack_env["KDR_STATE_DIR"])
        self.env = {**os.environ, **pulumi_env(root / "backend"), **self.stack_env}
        self.env.update(
            PULUMI_CONFIG_PASSPHRASE_FILE=str(_passphrase(root)),
            PULUMI_PYTHON_CMD=str(REPO_ROOT / ".venv" / "bin" / "python"),
        )

    def pulumi(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run the locally built `pulumi` in the project directory."""
        out = processes.run(
            [str(toolchain().pulumi_bin / "pulumi"), *args, "--non-interactive"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert out.returncode == 0, f"pulumi {' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
        return out

    @property
    def estate(self) -> Estate:
        """The runtime view of the stack (endpoints, processes)."""
        return self.stack_env.estate()


#: The ordered steps that passed, for a later step to name the earlier one it needs.
PASSED: set[str] = set()


def _needs(step: str) -> None:
    """Fail at once, naming ``step``, when that earlier step of the module did not pass."""
    if step not in PASSED:
        pytest.fail(f"this step runs on the estate step {step!r} leaves, and that step did not pass (see above)")


def _passphrase(root: Path) -> Path:
    path = root / "passphrase"
    path.write_text(uuid.uuid4().hex)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("pulumi-project")
    shutil.copy(REPO_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "stacks").symlink_to(REPO_ROOT / "stacks")
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], stack_ports, strict=True):
        c["base_port"] = port
    (root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    p = Project(root)
    p.pulumi("stack", "select", "--create", STACK)
    try:
        yield p
    finally:
        p.pulumi("destroy", "--yes", "--skip-preview", check=False)
        for c in ("A", "B", "C"):  # whatever a failed test left running
            with contextlib.suppress(Exception):  # noqa: BLE001
                p.estate.local_cluster(c).destroy()


def test_up_provisions_the_estate(project: Project) -> None:
    out = project.pulumi("up", "--yes", "--skip-preview")
    assert "warning" not in out.stderr.lower() or "plugin" not in out.stderr.lower(), out.stderr
    estate = project.estate
    assert estate.local_cluster("A").state() == "running" and len(estate.local_cluster("A").running_nodes()) == 4
    assert estate.local_cluster("B").state() == "running"
    assert estate.local_cluster("C").state() == "absent", "the standby is declared, not provisioned"
    assert estate.mirror("A-to-B").alive()
    topics = AdminClient(estate.endpoint("B").config()).list_topics(timeout=10).topics
    assert {"orders", "payments"} <= set(topics)
    outputs = project.pulumi("stack", "output", "--json").stdout
    assert '"role": "active"' in outputs and "[secret]" in outputs
    assert estate.app_password("orders-app") not in outputs
    PASSED.add("pulumi up")


def test_writes_only_on_the_active_cluster_and_copied(project: Project) -> None:
    _needs("pulumi up")
    estate = project.estate
    app_a = estate.endpoint("A").with_user("orders-app", estate.app_password("orders-app"))
    app_b = estate.endpoint("B").with_user("orders-app", estate.app_password("orders-app"))
    keys = [f"k{i}" for i in range(50)]
    acked, errors = produce(app_a, "orders", keys)
    assert sorted(acked) == sorted(keys) and not errors
    refused, errors_b = produce(app_b, "orders", ["on-b"], **{"message.timeout.ms": 5000})
    assert refused == [] and errors_b, "an application wrote to the passive cluster"
    copied = consume_all(estate.endpoint("B"), "orders", expected=50, timeout=60)
    assert set(keys) <= set(copied)


def test_preview_is_clean_right_after_up(project: Project) -> None:
    _needs("pulumi up")
    out = project.pulumi("preview", "--expect-no-changes", check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_topic_deleted_behind_pulumis_back_is_seen_and_restored(project: Project) -> None:
    _needs("pulumi up")
    admin = AdminClient(project.estate.endpoint("A").config())
    admin.delete_topics(["payments"])["payments"].result(timeout=30)
    assert wait_until(lambda: "payments" not in admin.list_topics(timeout=10).topics, 30)
    refreshed = project.pulumi("refresh", "--yes", "--skip-preview")
    assert "A-topic-payments" in refreshed.stdout, refreshed.stdout
    project.pulumi("up", "--yes", "--skip-preview")
    assert "payments" in admin.list_topics(timeout=10).topics


def test_killed_estate_comes_back_with_every_message(project: Project) -> None:
    _needs("pulumi up")
    estate = project.estate
    before = consume_all(estate.endpoint("A"), "orders", expected=50, timeout=60)
    for name in ("A", "B"):
        for pid in estate.local_cluster(name).pids().values():
            os.kill(pid, signal.SIGKILL)
    mm = estate.mirror("A-to-B")
    if mm.process.pid:
        os.kill(mm.process.pid, signal.SIGKILL)
    assert wait_until(lambda: not estate.local_cluster("A").running_nodes(), 10)
    project.pulumi("up", "--refresh", "--yes", "--skip-preview")
    estate = project.estate
    assert estate.local_cluster("A").state() == "running" and estate.local_cluster("B").state() == "running"
    assert estate.mirror("A-to-B").alive()
    after = consume_all(estate.endpoint("A"), "orders", expected=len(before), timeout=60)
    assert sorted(after) == sorted(before)
    assert project.pulumi("preview", "--expect-no-changes", check=False).returncode == 0
    PASSED.add("back after a kill")


def test_drctl_estate_up_preview_and_status_on_the_stack_pulumi_made(project: Project) -> None:
    """``drctl estate up`` on the stack the bare ``pulumi up`` made: idempotent, only ``pulumi up`` timed;
    ``estate preview`` clean; ``estate status`` shows A and B running, the standby C absent, the link
    running; orders-app writes on A, billing reads the copy on B by assignment (it holds no group right on
    the passive: docs/security.md), and orders-app is refused on B."""
    _needs("back after a kill")
    up = drctl(project.env, "estate", "up", "--stack", STACK, "--json")
    assert up.returncode == 0, up.stderr[-2000:]
    timings = json.loads(up.stdout)["timings_s"]
    assert set(timings) == {"pulumi up", "state edits"}, timings  # the state edits are a part of the up
    assert 0 <= timings["state edits"] <= timings["pulumi up"], timings
    preview = drctl(project.env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-2000:] + preview.stderr[-2000:]

    status = json.loads(drctl(project.env, "estate", "status", "--stack", STACK, "--json").stdout)
    states = {c["name"]: c.get("state") for c in status["clusters"]}
    assert states == {"A": "running", "B": "running", "C": "absent"}, "a standby is not provisioned"
    assert status["links"][0]["process"] == "running"

    estate = project.estate
    app_a = estate.endpoint("A").with_user("orders-app", estate.app_password("orders-app"))
    app_b = estate.endpoint("B").with_user("orders-app", estate.app_password("orders-app"))
    acked, errors = produce(app_a, "orders", [f"o{i}" for i in range(200)])
    assert not errors and len(acked) == 200, errors[:3]
    estate.mirror("A-to-B").wait_caught_up(["orders"], timeout=90)
    billing_b = estate.endpoint("B").with_user("billing", estate.app_password("billing"))
    earlier = [f"k{i}" for i in range(50)]  # what test_writes_only_on_the_active_cluster_and_copied wrote
    copied = consume_all(billing_b, "orders", 250, assigned=True)
    assert sorted(copied) == sorted([*earlier, *acked]), "billing reads on B exactly what A acknowledged, once"
    refused, errors = produce(app_b, "orders", ["nope"], retries=0, **{"message.timeout.ms": 10000})
    assert refused == [] and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    PASSED.add("estate up")


def test_the_metadata_file_a_killed_engine_left_empty_stops_pulumi_and_drctl_repairs_it(project: Project) -> None:
    """The blob layer writes ``<checkpoint>.attrs`` in place before it renames the new checkpoint in: an
    engine killed between the two (the crash-anywhere test met it) leaves it empty beside a whole
    checkpoint. The bare CLI then refuses every command; ``drctl`` removes the damaged sidecar (nothing
    else) and converges."""
    _needs("estate up")
    stacks = project.root / "backend" / ".pulumi" / "stacks" / "kafka-dr"
    sidecar = stacks / f"{STACK}.json.attrs"
    assert sidecar.is_file(), sorted(p.name for p in stacks.iterdir())
    checkpoint = (stacks / f"{STACK}.json").read_bytes()
    sidecar.write_bytes(b"")
    bare = project.pulumi("stack", "output", "--json", check=False)
    assert bare.returncode != 0 and "failed to load checkpoint: EOF" in bare.stderr, bare.stdout + bare.stderr
    preview = drctl(project.env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-2000:] + preview.stderr[-2000:]
    assert (stacks / f"{STACK}.json").read_bytes() == checkpoint, "the checkpoint itself is not rewritten"
    assert project.pulumi("stack", "output", "--json").returncode == 0


def test_unknown_stack_exits_2_naming_known_stacks(project: Project) -> None:
    res = drctl(project.env, "estate", "status", "--stack", "nosuch")
    assert res.returncode == 2
    assert "unknown stack 'nosuch'" in res.stderr and STACK in res.stderr


def test_estate_down_stops_every_process_keeps_the_data_and_up_refresh_brings_it_back(project: Project) -> None:
    _needs("estate up")
    estate = project.estate
    before = consume_all(estate.endpoint("A"), "orders", expected=250, timeout=60)
    pids = [p for name in ("A", "B") for p in estate.local_cluster(name).pids().values()]
    stop = drctl(project.env, "estate", "down", "--stack", STACK)
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert pids and not any(pid_alive(p) for p in pids), "down stops every process"
    assert (project.state / STACK / "clusters" / "A").exists(), "down keeps the data"
    back = drctl(project.env, "estate", "up", "--stack", STACK, "--refresh")
    assert back.returncode == 0, back.stderr[-2000:]
    assert estate.local_cluster("A").state() == "running" and estate.mirror("A-to-B").alive()
    billing_b = estate.endpoint("B").with_user("billing", estate.app_password("billing"))
    kept = consume_all(billing_b, "orders", len(before), assigned=True)
    assert len(before) >= 250 and set(before) <= set(kept), "records kept across the stop"
    PASSED.add("estate down and up")


def test_invalid_topology_stops_before_any_resource(project: Project, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(project.root / "Pulumi.yaml", bad / "Pulumi.yaml")
    (bad / "stacks").symlink_to(REPO_ROOT / "stacks")
    doc = yaml.safe_load((project.root / f"Pulumi.{STACK}.yaml").read_text())
    doc.pop("encryptionsalt", None)  # a new stack with its own passphrase
    doc["config"]["kafka-dr:clusters"][1]["role"] = "active"  # two active clusters
    (bad / "Pulumi.bad.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    p = Project(bad)
    p.pulumi("stack", "select", "--create", "bad")
    out = p.pulumi("up", "--yes", "--skip-preview", check=False)
    assert out.returncode != 0
    from dr.base.errors import DRError
    from dr.topology import load_stack_file as load

    with pytest.raises(DRError) as expected:
        load(bad / "Pulumi.bad.yaml")
    assert str(expected.value).splitlines()[0] in out.stdout + out.stderr
    state = p.pulumi("stack", "export").stdout
    assert "kafka-dr:index:KafkaCluster" not in state
    assert not (bad / "state" / "bad" / "clusters").exists()


def test_destroy_leaves_no_process_and_no_data(project: Project) -> None:
    _needs("estate down and up")
    estate = project.estate
    pids = [*estate.local_cluster("A").pids().values(), *estate.local_cluster("B").pids().values()]
    mm_pid = estate.mirror("A-to-B").process.pid
    project.pulumi("destroy", "--yes", "--skip-preview")
    assert pids and mm_pid and not any(pid_alive(pid) for pid in [*pids, mm_pid])
    assert not (project.state / STACK / "clusters" / "A").exists()
    assert not (project.state / STACK / "clusters" / "B").exists()
    assert not estate.mirror("A-to-B").alive()


@pytest.fixture
def clash_ports() -> Iterator[tuple[int, int, int]]:
    """Three more windows, for a second stack beside the module's."""
    with windows(3) as starts:
        yield starts


def test_a_cluster_that_cannot_start_fails_its_resource_and_leaves_nothing_half_started(
    tmp_path: Path, clash_ports: tuple[int, int, int]
) -> None:
    import socket

    root = tmp_path / "clash"
    root.mkdir()
    shutil.copy(REPO_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "stacks").symlink_to(REPO_ROOT / "stacks")
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], clash_ports, strict=True):
        c["base_port"] = port
        if c["name"] == "A":
            c["brokers"], c["racks"] = 1, ["r1"]
    (root / "Pulumi.clash.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    p = Project(root, "clash")
    p.pulumi("stack", "select", "--create", "clash")
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", clash_ports[1]))  # B's client port
    holder.listen()
    try:
        out = p.pulumi("up", "--yes", "--skip-preview", check=False)
        text = out.stdout + out.stderr
        assert out.returncode != 0
        assert "B-brokers" in text and f"127.0.0.1:{clash_ports[1]}" in text and "already in use" in text, text[-3000:]
        estate = p.estate
        assert estate.local_cluster("B").state() == "absent", "B was left half-started"
        assert not estate.mirror("A-to-B").alive()
    finally:
        holder.close()
        p.pulumi("destroy", "--yes", "--skip-preview", check=False)
        p.estate.stop()
