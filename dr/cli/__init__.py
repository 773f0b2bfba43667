"""``drctl``, every command in one home: the group (:mod:`dr.cli.drctl`), the failover commands
(:mod:`dr.cli.failover`) and the verification commands (:mod:`dr.cli.verify`)."""

from dr.cli.drctl import cli, main

__all__ = ["cli", "main"]
