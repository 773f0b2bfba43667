"""Secrets as they appear in stack config: plaintext from the engine, or still-encrypted ciphertext.

A raw ``Pulumi.<stack>.yaml`` holds secrets as ``{"secure": "v1:..."}``. The file loader cannot
decrypt them (only the Pulumi engine can), so it keeps the ciphertext in a :class:`StackSecret`
marked ``is_encrypted``; the Pulumi program reads decrypted config from the engine instead and gets
plaintext secrets. Either way ``repr``/``str`` show only ``**********``.
"""

from __future__ import annotations

from secrets import compare_digest
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, SecretStr

from dr.base.errors import ConfigError

__all__ = ["Secret", "StackSecret"]


class StackSecret(SecretStr):
    """A secret stack-config value; ``is_encrypted`` tells ciphertext from a usable plaintext."""

    def __init__(self, secret_value: str, *, encrypted: bool = False) -> None:
        super().__init__(secret_value)
        self._encrypted = encrypted

    @property
    def is_encrypted(self) -> bool:
        """True when the value is Pulumi ciphertext (``secure: v1:...``), not the secret itself."""
        return self._encrypted

    def to_stack_value(self) -> dict[str, str]:
        """The ``{"secure": ciphertext}`` form to write back to a stack file (encrypted values only)."""
        if not self._encrypted:
            raise ConfigError(
                "a plaintext secret cannot be written to a stack file",
                "store it encrypted with `pulumi config set --secret --path ...` instead",
            )
        return {"secure": self.get_secret_value()}

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, SecretStr):
            return False
        other_encrypted = other.is_encrypted if isinstance(other, StackSecret) else False
        return other_encrypted == self._encrypted and compare_digest(
            self.get_secret_value().encode("utf-8", "surrogatepass"),
            other.get_secret_value().encode("utf-8", "surrogatepass"),
        )

    def __hash__(self) -> int:
        return hash((self._encrypted, self.get_secret_value()))


def _coerce(value: Any) -> Any:
    if isinstance(value, StackSecret) or value is None:
        return value
    if isinstance(value, SecretStr):
        return StackSecret(value.get_secret_value())
    if isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str):
        return StackSecret(value["secure"], encrypted=True)
    if isinstance(value, str):
        return StackSecret(value)
    return value  # let pydantic report the type error


def _serialize(value: StackSecret) -> Any:
    # JSON-mode dumps never carry plaintext: ciphertext keeps its stack form, plaintext is masked.
    return value.to_stack_value() if value.is_encrypted else str(value)


Secret = Annotated[StackSecret, BeforeValidator(_coerce), PlainSerializer(_serialize, when_used="json")]
"""Field type for secrets: accepts a string, a ``SecretStr`` or ``{"secure": ciphertext}``."""
