"""``pulumi up`` entry point: only wires (see :mod:`stacks.program`)."""

from stacks.program import run

run()
