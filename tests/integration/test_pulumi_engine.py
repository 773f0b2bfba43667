"""The locally built Pulumi CLI and engine, with the local file backend and passphrase secrets."""

from __future__ import annotations

import json
from pathlib import Path

from dr.base.pulumi_env import pulumi_command, pulumi_env
from dr.base.toolchain import toolchain, versions
from dr.runtime.cluster import LocalCluster
from tests import processes


def test_pulumi_version_is_the_locally_built_cli(tmp_path: Path) -> None:
    env = pulumi_env(tmp_path / "backend")
    out = processes.run(
        [str(toolchain().pulumi_bin / "pulumi"), "version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"v{versions()['PULUMI_VERSION']}"
    plugins = processes.run(
        [str(toolchain().pulumi_bin / "pulumi"), "plugin", "ls", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plugins.returncode == 0, plugins.stderr
    assert isinstance(json.loads(plugins.stdout or "[]"), list)


def test_engine_runs_a_python_dynamic_provider_against_a_real_cluster(cluster_a: LocalCluster, tmp_path: Path) -> None:
    """Automation API inline program → real engine → Python dynamic provider → real Kafka topic.

    The engine creates the topic on ``up`` and deletes it on ``destroy``; a secret config value
    is stored encrypted with the passphrase, never in plaintext.
    """
    from confluent_kafka.admin import AdminClient
    from pulumi import automation as auto

    import tests.integration.pulumi_topic_program as program

    endpoint = cluster_a.endpoint()
    env = pulumi_env(tmp_path / "backend")
    ws = auto.LocalWorkspaceOptions(
        work_dir=str(tmp_path),
        pulumi_home=env["PULUMI_HOME"],
        env_vars=env,
        secrets_provider="passphrase",
        pulumi_command=pulumi_command(),
        project_settings=auto.ProjectSettings(name="kdr-engine-check", runtime="python"),
    )
    stack = auto.create_or_select_stack(
        stack_name="check",
        project_name="kdr-engine-check",
        program=program.make(endpoint.bootstrap, endpoint.username),
        opts=ws,
    )
    stack.set_config("kdr:adminPassword", auto.ConfigValue(endpoint.password, secret=True))
    try:
        result = stack.up(on_output=lambda _l: None)
        assert result.summary.result == "succeeded"
        assert result.outputs["topic"].value == "engine-made"
        admin = AdminClient(endpoint.config())
        assert "engine-made" in admin.list_topics(timeout=10).topics

        state_text = "".join(p.read_text() for p in (tmp_path / "backend").rglob("*.json"))
        stack_file = (tmp_path / "Pulumi.check.yaml").read_text()
        assert endpoint.password not in state_text and endpoint.password not in stack_file
        assert "secure:" in stack_file

        stack.destroy(on_output=lambda _l: None)
        assert "engine-made" not in AdminClient(endpoint.config()).list_topics(timeout=10).topics
    finally:
        stack.workspace.remove_stack("check", force=True)


def test_kafka_provider_and_python_language_host_are_installed(tmp_path: Path) -> None:
    """setup built both plugins: the engine lists the Kafka provider at the SDK's version, and the
    language host sits beside the CLI (where the engine finds it without a warning)."""
    env = pulumi_env(tmp_path / "backend")
    out = processes.run(
        [str(toolchain().pulumi_bin / "pulumi"), "plugin", "ls", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    plugins = {(p["name"], p["kind"], p["version"]) for p in json.loads(out.stdout or "[]")}
    assert ("kafka", "resource", versions()["PULUMI_KAFKA_VERSION"]) in plugins, plugins
    for name in ("pulumi-language-python", "pulumi-language-python-exec"):
        assert (toolchain().pulumi_bin / name).is_file(), f"{name} is not beside the CLI"
