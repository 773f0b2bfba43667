"""The Kafka layer: the admin/consumer client, offsets and the Kafka Connect REST client.

It imports only :mod:`dr.base`.
"""
