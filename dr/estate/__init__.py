"""The estate layer: a stack's live clusters and links (:mod:`dr.estate.estate`) and the driver of its
Pulumi program (:mod:`dr.estate.stack`).
"""
