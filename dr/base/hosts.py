"""Host names as the product judges them: one place that says whether a host is this machine's loopback."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (IPv4 or IPv6, without brackets); a name is not resolved."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
