"""The topology of a Kafka disaster-recovery estate: typed model, validation, stack config I/O.

One :class:`Topology` flows through the product: the Pulumi program provisions it, the failover
pipeline changes it (:meth:`Topology.after_failover`, then :func:`write_stack_config` edits the
stack file in place), and the verifier reads it.
"""

from dr.topology.architectures import ARCHITECTURES
from dr.topology.model import (
    PORT_WINDOW,
    Application,
    Architecture,
    Cluster,
    ConnectCluster,
    ConnectCredentials,
    Delivery,
    Engine,
    Kind,
    Link,
    LinkIntervals,
    Naming,
    Placement,
    Principals,
    Profile,
    Quota,
    Role,
    Tls,
    Topic,
    Topology,
    WorkerTls,
    register_architectures,
    register_rule_check,
)
from dr.topology.secret import Secret, StackSecret
from dr.topology.stackconfig import (
    NAMESPACE,
    StackFile,
    dump_stack_config,
    load_stack_file,
    load_topology,
    read_stack_file,
)
from dr.topology.stackfile import stack_file_diff, write_stack_config
from dr.topology.validation import find_violations, raise_for_violations
from dr.topology.violation import Violation

# Every Topology constructed is checked against every rule (the model does not import its rules).
register_rule_check(raise_for_violations)
register_architectures(ARCHITECTURES)  # what the model and the topic queries ask of each architecture

__all__ = [
    "NAMESPACE",
    "PORT_WINDOW",
    "Application",
    "Architecture",
    "Cluster",
    "ConnectCluster",
    "ConnectCredentials",
    "Delivery",
    "Engine",
    "Kind",
    "Link",
    "LinkIntervals",
    "Naming",
    "Placement",
    "Principals",
    "Profile",
    "Quota",
    "Role",
    "Secret",
    "StackFile",
    "StackSecret",
    "Tls",
    "Topic",
    "Topology",
    "Violation",
    "WorkerTls",
    "dump_stack_config",
    "find_violations",
    "load_stack_file",
    "load_topology",
    "read_stack_file",
    "stack_file_diff",
    "write_stack_config",
]
