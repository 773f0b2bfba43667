"""Shared pytest configuration: integration tests are marked by their directory."""

from __future__ import annotations

import pytest
from hypothesis import settings

# Property tests assert what holds, not how fast: hypothesis's default 200 ms per example fails them
# at random on a machine busy with the suite's JVMs (speed is benchmarks/' business).
settings.register_profile("kdr", deadline=None)
settings.load_profile("kdr")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


def pytest_configure(config: pytest.Config) -> None:
    """Tests choose their own Pulumi backend and passphrase: a developer's `source .env` (which sets
    them for the clone's own stacks) must not send test stacks into that backend."""
    import os

    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        os.environ.pop(name, None)
