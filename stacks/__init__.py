"""The Pulumi program that provisions the estate (``Pulumi.yaml`` ``main: stacks/``).

Components: :class:`~stacks.cluster.KafkaCluster`, :class:`~stacks.access.ClusterAccess`,
:class:`~stacks.link.ReplicationLink`; the local cluster and MirrorMaker 2 process are Python
dynamic resources over :mod:`dr.runtime`. :func:`stacks.program.run` is the program.
"""
