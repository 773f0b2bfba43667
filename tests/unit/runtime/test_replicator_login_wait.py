"""A link's MirrorMaker 2 is launched only once its replicator logs in on both ends (a SCRAM credential
created a moment ago is committed before the broker applies it; MirrorMaker 2 stops for good on its first
failed login — CI's 200-topic failover lost its B→C link that way). A refusal is known within a second
(:func:`dr.kafka.client.connected_admin`), so each try is short."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dr.base.errors import AuthError, DRError
from dr.kafka.client import Endpoint
from dr.runtime import mirrormaker
from dr.runtime.mirrormaker import MirrorMaker


class _Cluster:
    def __init__(self, name: str) -> None:
        self.name = name

    def endpoint(self, user: str) -> Endpoint:
        return Endpoint(f"127.0.0.1:{9092 if self.name == 'B' else 9192}", user, "pw", cluster=self.name)


def _link() -> Any:
    return SimpleNamespace(source=_Cluster("B"), target=_Cluster("C"))


def test_the_launch_waits_until_a_new_credential_logs_in(monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[str] = []

    def connected(endpoint: Endpoint, timeout: float) -> Any:
        tries.append(endpoint.cluster or "")
        if endpoint.cluster == "C" and tries.count("C") < 3:
            raise AuthError(f"{endpoint.bootstrap} refused user {endpoint.username!r}: authentication failed.")
        return None, None

    monkeypatch.setattr(mirrormaker, "connected_admin", connected)
    monkeypatch.setattr(mirrormaker.time, "sleep", lambda s: None)
    MirrorMaker._await_replicator_login(_link(), timeout=30)
    assert tries == ["B", "C", "C", "C"]


def test_a_login_that_keeps_failing_is_an_error_naming_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    def connected(endpoint: Endpoint, timeout: float) -> Any:
        if endpoint.cluster == "C":
            raise AuthError(f"{endpoint.bootstrap} refused user {endpoint.username!r}: authentication failed.", "fix")
        return None, None

    monkeypatch.setattr(mirrormaker, "connected_admin", connected)
    with pytest.raises(DRError) as caught:
        MirrorMaker._await_replicator_login(_link(), timeout=0.3)
    assert isinstance(caught.value, AuthError)
    assert "logging in to C as the replicator" in str(caught.value) and "authentication failed" in str(caught.value)
