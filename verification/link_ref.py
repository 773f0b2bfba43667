"""``LinkRef``: which link of which stack a verification, an audit or its state is about."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LinkRef"]


@dataclass(frozen=True, kw_only=True)
class LinkRef:
    """A link of a stack and its two clusters, by name (reports and state files keep the four flat)."""

    stack: str
    link: str
    source: str
    target: str

    def fields(self) -> dict[str, str]:
        """The four as the audit's state and functions name them (``source_cluster``, ``target_cluster``)."""
        return {"stack": self.stack, "link": self.link, "source_cluster": self.source, "target_cluster": self.target}
