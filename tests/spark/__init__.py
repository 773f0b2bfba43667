"""Tests that start Spark (a local JVM) or need the toolchain's connector jars; `make unit` leaves them out."""
