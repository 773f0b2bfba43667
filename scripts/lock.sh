#!/usr/bin/env bash
# Writes requirements.lock: every Python package the product and `make lint` install (pyproject.toml's pinned
# dependencies and its `dev` extra, and everything they pull in), each at one version with the sha256 of every
# file PyPI serves for it. scripts/setup.sh installs from it with `pip --require-hashes` and keys its cached
# virtualenv by its hash. Run it after changing a dependency in pyproject.toml, and commit the result
# (tests/unit/test_lockfile.py fails while the two disagree). Needs only PyPI: uv is fetched into a temporary venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UV_VERSION=0.13.9
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${PYTHON:-python3.11}" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet "uv==$UV_VERSION"
cd "$ROOT"
"$tmp/venv/bin/uv" pip compile pyproject.toml toolchain/python-bootstrap.in --extra dev --allow-unsafe --generate-hashes --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --no-header --quiet --no-cache -o requirements.lock.new
{ echo "# The locked Python environment (scripts/lock.sh writes it from pyproject.toml; do not edit by hand)."
  cat requirements.lock.new; } > requirements.lock
rm -f requirements.lock.new
echo "requirements.lock: $(grep -c '^[a-z0-9]' requirements.lock) packages"
