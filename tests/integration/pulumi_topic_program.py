"""A tiny Pulumi program with a Python dynamic provider that manages one Kafka topic.

Used by the engine test only: it proves the engine, the file backend, secrets and the
``pulumi-resource-pulumi-python`` plugin work together against a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class _TopicProvider(ResourceProvider):
    def create(self, props: dict) -> CreateResult:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(_config(props))
        admin.create_topics([NewTopic(props["name"], 1, 1)])[props["name"]].result(timeout=30)
        return CreateResult(id_=props["name"], outs=props)

    def delete(self, id_: str, props: dict) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(_config(props))
        admin.delete_topics([id_])[id_].result(timeout=30)


def _config(props: dict) -> dict:
    return {
        "bootstrap.servers": props["bootstrap"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": props["username"],
        "sasl.password": props["password"],
    }


class TopicCheck(Resource):
    """One topic created and deleted by the dynamic provider."""

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_TopicProvider(), name, props, opts)


def make(bootstrap: str, username: str) -> Callable[[], None]:
    """The inline program; the password comes from the stack's secret config."""

    def program() -> None:
        password = pulumi.Config("kdr").require_secret("adminPassword")
        TopicCheck(
            "engine-made", {"name": "engine-made", "bootstrap": bootstrap, "username": username, "password": password}
        )
        pulumi.export("topic", "engine-made")

    return program
