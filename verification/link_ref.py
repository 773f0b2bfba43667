"""``LinkRef``: which link of which stack a verification, an audit or its state is about."""

from __future__ import annotations

from pydantic import ConfigDict

from dr.base.types import Model

__all__ = ["LinkRef"]


class LinkRef(Model):
    """A link of a stack and its two clusters, by name.

    What reports about one link (:class:`~verification.audit.AuditResult`,
    :class:`~dr.failover.lifecycle.LinkChange`) derive from: the four come first in their JSON, flat."""

    model_config = ConfigDict(frozen=True)

    stack: str
    link: str
    source: str
    target: str

    def fields(self) -> dict[str, str]:
        """The four as the audit's state and functions name them (``source_cluster``, ``target_cluster``)."""
        return {"stack": self.stack, "link": self.link, "source_cluster": self.source, "target_cluster": self.target}
