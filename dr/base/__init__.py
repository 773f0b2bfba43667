"""The base layer: errors and exit codes, atomic files, the project and its toolchain, the Pulumi environment.

It imports nothing else of the product; every other layer may import it.
"""
