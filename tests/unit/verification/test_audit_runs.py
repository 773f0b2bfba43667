"""drctl audit's audit_link across runs and the `audit` command, with the Kafka I/O replaced by in-memory logs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from dr.base.errors import ConfigError
from dr.base.stackref import StackRef
from dr.cli import verify as verify_commands
from dr.cli.verify import audit as audit_cmd
from verification import audit as audit_mod
from verification.audit_state import Fingerprint

Log = dict[tuple[str, int], list[Fingerprint]]


class FakeLink:
    """A source log and a target log; ``copy(n)`` replicates the next ``n`` source records in order."""

    def __init__(self) -> None:
        self.source: Log = {}
        self.target: Log = {}
        self.copied: dict[tuple[str, int], int] = {}
        self.ids = {"A": "id-a", "B": "id-b"}
        self.reads: list[int] = []

    def write(self, n: int, topic: str = "orders", partition: int = 0) -> None:
        log = self.source.setdefault((topic, partition), [])
        for _ in range(n):
            i = len(log)
            log.append(Fingerprint(topic, partition, i, 1000 + i, hash(f"k{topic}{partition}{i}"), i))

    def copy(
        self, n: int | None = None, *, drop: set[int] = frozenset(), topic: str = "orders", partition: int = 0
    ) -> None:
        src = self.source.get((topic, partition), [])
        done = self.copied.get((topic, partition), 0)
        upto = len(src) if n is None else min(len(src), done + n)
        dst = self.target.setdefault((topic, partition), [])
        for f in src[done:upto]:
            if f.offset not in drop:
                dst.append(f._replace(offset=len(dst)))
        self.copied[(topic, partition)] = upto

    def install(self, mp: pytest.MonkeyPatch) -> None:
        def side(ep: object) -> Log:
            return self.source if ep == "A" else self.target

        def connected_admin(ep, *_a, **_k):  # noqa: ANN001, ANN202
            parts = side(ep)
            topics = {
                t: SimpleNamespace(error=None, partitions={p: None for (tt, p) in parts if tt == t})
                for (t, _p) in parts
            }
            return ep, SimpleNamespace(topics=topics)

        def offsets(_admin, ep, topics):  # noqa: ANN001, ANN202
            return {(t, p): (0, len(side(ep).get((t, p), []))) for t, n in topics.items() for p in range(n)}

        def read(ep, ranges):  # noqa: ANN001, ANN202
            out = [f for t, ps in ranges.items() for p, (s, e) in ps.items() for f in side(ep).get((t, p), [])[s:e]]
            self.reads.append(len(out))
            return out

        class Estate:
            topology = SimpleNamespace(
                links=[SimpleNamespace(name="A-to-B", source="A", target="B", selects_topic=lambda _t: True)]
            )

            @classmethod
            def for_stack(cls, _stack: StackRef) -> Estate:
                return cls()

            def endpoint(self, name: str) -> str:
                return name

        import dr.estate.estate

        mp.setattr(dr.estate.estate, "Estate", Estate)
        mp.setattr(audit_mod.kafka_client, "connected_admin", connected_admin)
        mp.setattr(audit_mod, "cluster_id", lambda admin, _ep: self.ids[admin])
        mp.setattr(audit_mod, "_offsets", offsets)
        mp.setattr(audit_mod, "read_fingerprints", read)


@pytest.fixture
def link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLink:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    fake = FakeLink()
    fake.install(monkeypatch)
    return fake


def run(**kw: object) -> audit_mod.AuditResult:
    return verify_commands.audit_link(StackRef.resolve("s"), "A-to-B", **kw)


def test_three_runs_in_flight_then_missing_reads_only_new_data(link: FakeLink) -> None:
    link.write(100)
    link.copy()
    r1 = run()
    assert r1.first_run and (r1.verified, r1.in_flight, r1.missing) == (100, 0, 0)

    link.write(30)  # link behind: nothing copied yet
    link.copy(10)
    r2 = run()
    assert not r2.first_run and (r2.read_source, r2.read_target) == (30, 10)
    assert (r2.verified, r2.in_flight, r2.missing, r2.link_lag) == (10, 20, 0, 20)
    assert r2.oldest_unreplicated_ms == 1000 + 110 and r2.oldest_unreplicated_age_s > 0

    link.write(20)
    link.copy(drop={112, 113})  # the link dropped two records and went on
    r3 = run(sample=1)
    assert (r3.read_source, r3.read_target) == (20, 38)
    assert (r3.verified, r3.in_flight, r3.missing) == (38, 0, 2)
    assert r3.missing_sample == [{"topic": "orders", "partition": 0, "offset": 112, "ts": 1112}]
    assert r3.verified_total == 148 and r3.run == 3

    r4 = run()  # nothing new: nothing read, the missing ones still reported
    assert (r4.read_source, r4.read_target, r4.verified, r4.missing) == (0, 0, 0, 2)


def test_a_new_partition_behind_is_in_flight(link: FakeLink) -> None:
    link.write(5)
    link.copy()
    run()
    link.write(3, partition=1)
    r = run()
    assert (r.in_flight, r.missing) == (3, 0)


def test_state_from_a_recreated_cluster_is_refused_and_reset_starts_over(link: FakeLink) -> None:
    link.write(5)
    link.copy()
    first = run()
    link.ids["B"] = "id-b-new"
    with pytest.raises(ConfigError) as err:
        run()
    assert first.state_file in str(err.value) and "--reset" in str(err.value)
    again = run(reset=True)
    assert again.first_run and again.verified == 5


def test_cli_exit_codes_json_and_every(link: FakeLink, monkeypatch: pytest.MonkeyPatch) -> None:
    link.write(10)
    link.copy()
    res = CliRunner().invoke(audit_cmd, ["--stack", "s", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["links"][0]["verified"] == 10

    link.write(5)
    link.copy(drop={10})
    res = CliRunner().invoke(audit_cmd, ["--stack", "s", "--quiet"])
    assert res.exit_code == 1
    assert "missing beyond the link's lag 1" in res.stdout and "missing: orders-0@10" in res.stdout
    assert "1 record(s) missing" in res.stderr

    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("time.sleep", sleep)
    res = CliRunner().invoke(audit_cmd, ["--stack", "s", "--every", "5", "--json", "--quiet"])
    assert sleeps == [5, 5] and len(res.stdout.splitlines()) == 2 and res.exit_code == 1
    assert CliRunner().invoke(audit_cmd, ["--stack", "s", "--every", "0"]).exit_code == 2


def test_damaged_state_file_exit_2_naming_it(link: FakeLink) -> None:
    link.write(1)
    link.copy()
    path = Path(run().state_file)
    path.write_text("{")
    res = CliRunner().invoke(audit_cmd, ["--stack", "s", "--quiet"])
    assert res.exit_code == 2 and str(path) in res.stderr and "--reset" in res.stderr
