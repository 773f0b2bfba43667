"""A bare ``pulumi up`` from a fresh clone keeps the passwords the stack generated
(:mod:`stacks.kept_passwords`); the Pulumi CLI call itself is exercised by
tests/integration/test_external_estate.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stacks.kept_passwords as kept_passwords
from dr.base.errors import ConfigError
from dr.runtime.credentials import Credentials
from dr.topology import Topology, load_topology


def _topology() -> Topology:
    return load_topology(
        "kept",
        {
            "kafka-dr:clusters": [
                {"name": "A", "role": "active", "brokers": 1, "base_port": 21000},
                {"name": "B", "role": "passive", "brokers": 1, "base_port": 21100},
            ],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {
                "applications": [
                    {"name": "orders-app", "produces": ["orders"]},
                    {"name": "billing", "consumes": ["orders"], "consumer_group": "billing"},
                ]
            },
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )


def test_a_fresh_clone_takes_the_generated_passwords_from_the_last_deployment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def outputs(stack: str) -> dict[str, Any]:
        calls.append(stack)
        return {"credentials": {"orders-app": "o-pw", "billing": "b-pw", "replicator": "r-pw"}, "other": 1}

    monkeypatch.setattr(kept_passwords, "_previous_outputs", outputs)
    creds = Credentials(tmp_path)
    creds.set_password("billing", "mine")  # this clone already holds one: it is left alone
    assert kept_passwords.keep_generated(_topology(), creds) == ["orders-app", "replicator"]
    assert (creds.password("orders-app"), creds.password("billing"), creds.password("replicator")) == (
        "o-pw",
        "mine",
        "r-pw",
    )
    assert kept_passwords.keep_generated(_topology(), creds) == [] and calls == ["kept"], "asked once, when needed"


def test_a_stack_never_deployed_generates_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept_passwords, "_previous_outputs", lambda _stack: {})
    creds = Credentials(tmp_path)
    assert kept_passwords.keep_generated(_topology(), creds) == []
    assert creds.users() == []


def test_outputs_that_cannot_be_read_stop_the_program_naming_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho 'error: incorrect passphrase' >&2\necho 's3cret-value'\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setattr(kept_passwords, "_pulumi", lambda: str(fake))
    with pytest.raises(ConfigError) as info:
        kept_passwords.keep_generated(_topology(), Credentials(tmp_path / "state"))
    text = str(info.value) + info.value.fix
    assert "incorrect passphrase" in text and "PULUMI_CONFIG_PASSPHRASE" in text and "s3cret-value" not in text
    assert not (tmp_path / "state" / "credentials.json").exists()
