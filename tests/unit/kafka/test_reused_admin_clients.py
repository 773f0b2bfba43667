"""One admin client per endpoint inside :func:`dr.kafka.client.reused_admin_clients` (the controller's passes), a
new one per call outside it, renewed after :data:`~dr.kafka.client.REUSE_FOR_S` (a replaced certificate is read)."""

from __future__ import annotations

import pytest

from dr.kafka import client
from dr.kafka.client import Endpoint, admin_client, reused_admin_clients

A = Endpoint("127.0.0.1:1", "admin", "secret", cluster="A")  # nothing listens: a client connects lazily
B = Endpoint("127.0.0.1:2", "admin", "secret", cluster="B")


def test_outside_every_call_builds_its_own_client() -> None:
    assert admin_client(A) is not admin_client(A)


def test_inside_one_client_per_endpoint_and_none_kept_after() -> None:
    with reused_admin_clients():
        first = admin_client(A)
        assert (
            admin_client(A) is first and admin_client(Endpoint("127.0.0.1:1", "admin", "secret", cluster="A")) is first
        )
        assert admin_client(B) is not first
        assert admin_client(A.with_user("admin", "rotated")) is not first  # a new password is a new client
    assert admin_client(A) is not first


def test_a_client_is_renewed_after_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(client.time, "monotonic", lambda: now[0])
    with reused_admin_clients():
        first = admin_client(A)
        now[0] += client.REUSE_FOR_S - 1
        assert admin_client(A) is first
        now[0] += 2
        second = admin_client(A)
        assert second is not first and admin_client(A) is second
