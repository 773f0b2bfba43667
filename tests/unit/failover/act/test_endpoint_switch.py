"""The promote step's switch of the client endpoint (issue 31), without a proxy: a fake HAProxy runtime
API that keeps each server's state as HAProxy's ``show stat`` reports it. The switch points every port at
the target, cuts the sessions still open to the other clusters, and journals what it found before; a
preflight whose proxy does not answer refuses naming the step that fixes it."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest

from dr.base.errors import FailoverError
from dr.failover.act import endpoint_switch
from dr.failover.act.endpoint_switch import check_endpoint, switch_endpoint
from dr.runtime.endpoint import RuntimeApi
from dr.topology import Topology, client_endpoint, load_topology
from tests.unit.topology.test_topology_validation import LOCAL

ENDPOINT = {"address": "127.0.0.1", "bootstrapPort": 19900, "brokerPorts": [19901, 19902, 19903]}


def _topology(endpoint: bool = True) -> Topology:
    config = copy.deepcopy(LOCAL)
    if endpoint:
        config["kafka-dr:endpoint"] = ENDPOINT
    return load_topology("local", config)


class FakeProxy(RuntimeApi):
    """HAProxy's runtime API as far as the switch uses it: ``show stat`` (CSV, status in column 18),
    ``set server <backend>/<server> state ready|maint``, ``shutdown sessions server``; an unknown
    server answers "No such server." as HAProxy does."""

    def __init__(self, servers: dict[str, str], unknown: frozenset[str] = frozenset()) -> None:
        super().__init__("/nonexistent/fake.sock")
        self.servers = servers  # backend/server -> UP or MAINT
        self.unknown = unknown
        self.cut: list[str] = []

    def send(self, commands: list[str]) -> str:
        replies = []
        for command in commands:
            words = command.split()
            if command == "show stat":
                rows = [[*s.split("/", 1), *[""] * 15, state] for s, state in self.servers.items()]
                replies.append("\n".join(",".join(r) for r in [["# pxname", "svname"], *rows]))
                continue
            server = words[2] if words[0] == "set" else words[3]
            if server in self.unknown or server not in self.servers:
                replies.append("No such server.")
            elif words[0] == "set":
                self.servers[server] = "MAINT" if words[-1] == "maint" else "UP"
            else:
                self.cut.append(server)
        return "\n".join(replies)


def _proxy_on_a() -> FakeProxy:
    """A, B and C behind the endpoint (A: 3 brokers, B and C: 1), every port pointing at A."""
    servers = {f"kdr_bootstrap/A_{i}": "UP" for i in (1, 2, 3)} | {f"kdr_slot{i}/A": "UP" for i in (1, 2, 3)}
    for c in "BC":
        servers |= {f"kdr_bootstrap/{c}_1": "MAINT", f"kdr_slot1/{c}": "MAINT"}
    return FakeProxy(servers)


def test_the_switch_points_every_port_at_the_target_and_cuts_the_others_sessions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proxy = _proxy_on_a()
    monkeypatch.setattr(endpoint_switch, "endpoint_api", lambda _t, _s: proxy)
    monkeypatch.setattr(client_endpoint, "endpoint_api", lambda _t, _s: proxy)  # the preflight's reader
    assert check_endpoint(_topology(), tmp_path, "local") == ["A"]
    before_ms = int(time.time() * 1000)
    done = switch_endpoint(_topology(), tmp_path, "B")
    after_ms = int(time.time() * 1000)
    assert done is not None
    assert done["before"] == ["A"] and done["target"] == "B"
    assert before_ms <= done["switched_at_ms"] <= after_ms
    assert done["switch_s"] >= 0 and done["switch_s"] == round(done["switch_s"], 4)
    assert {s for s, state in proxy.servers.items() if state == "UP"} == {"kdr_bootstrap/B_1", "kdr_slot1/B"}
    a_and_c = {s for s in proxy.servers if "/A" in s or "/C" in s}
    assert set(proxy.cut) == a_and_c  # every session still open to A (and C) closed; none of B's
    assert check_endpoint(_topology(), tmp_path, "local") == ["B"]


def test_a_proxy_that_does_not_take_the_switch_fails_the_promote_naming_the_target(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proxy = _proxy_on_a()
    proxy.unknown = frozenset({"kdr_slot1/B"})  # a proxy configured without B in slot 1
    monkeypatch.setattr(endpoint_switch, "endpoint_api", lambda _t, _s: proxy)
    with pytest.raises(FailoverError) as err:
        switch_endpoint(_topology(), tmp_path, "B")
    assert "the endpoint did not switch to 'B'" in err.value.problem and "No such server." in err.value.problem
    assert "backend kdr_bootstrap and kdr_slot<i>" in err.value.fix


def test_without_an_endpoint_nothing_is_switched_or_checked(tmp_path: Path) -> None:
    assert switch_endpoint(_topology(endpoint=False), tmp_path, "B") is None
    assert check_endpoint(_topology(endpoint=False), tmp_path, "local") is None


def test_a_silent_proxy_stops_the_preflight_before_anything_changes(tmp_path: Path) -> None:
    """The local proxy's runtime socket under an empty state directory: nothing answers there."""
    with pytest.raises(FailoverError) as err:
        check_endpoint(_topology(), tmp_path, "prod")
    assert "runtime API" in err.value.problem and "does not answer" in err.value.problem
    assert err.value.problem.endswith("— the failover could not move the client endpoint")
    assert "`drctl estate up --stack prod`" in err.value.fix and "nothing was changed" in err.value.fix
    assert err.value.__suppress_context__  # the inner error's fix is replaced, not chained
