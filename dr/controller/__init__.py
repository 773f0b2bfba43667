"""The per-site controller (issue 43): a floor above :mod:`dr.failover`, below :mod:`dr.cli`.

One ``drctl controller --stack S --site <cluster>`` runs beside each cluster: it observes its site
(:mod:`.observe`), holds or watches the stack's lease in a witness (:mod:`.witness`: etcd v3 in
:mod:`.etcd`, the team's PostgreSQL in :mod:`.pg_witness`), and serves what it sees as Prometheus
metrics (:mod:`.metrics`) from its loop (:mod:`.loop`). A failover it starts goes through the same
``KINDS`` table as ``drctl failover``, never around it.
"""
