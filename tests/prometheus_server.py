"""A throwaway Prometheus for tests: Debian's binary from the cache (``scripts/setup.sh prometheus``), listening
on 127.0.0.1 at a free port below 32768 (:mod:`tests.integration.ports`), scraping the given targets every
second and evaluating the given rule files; killed and its data removed at the end.

``with prometheus_server(targets, rules) as url:`` yields its base URL; :func:`firing` lists the alerts it fires.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from dr.base.toolchain import prometheus

__all__ = ["firing", "prometheus_server"]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 — a loopback URL of ours
        return json.loads(response.read().decode())


def firing(url: str) -> list[dict[str, Any]]:
    """The alerts the server fires now (``state: firing``), each with its labels."""
    return [a for a in _get(url + "/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]


@contextmanager
def prometheus_server(targets: list[tuple[str, dict[str, str]]], rules: list[Path]) -> Iterator[str]:
    """Start Prometheus scraping each ``(host:port, labels)`` target and evaluating ``rules`` (see the module doc)."""
    from tests.integration.ports import free_window, release_window

    port = free_window(1)
    work = Path(tempfile.mkdtemp(prefix="kdr-prometheus-"))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [
            {
                "job_name": "kdr-controller",
                "static_configs": [{"targets": [t], "labels": labels} for t, labels in targets],
            }
        ],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{port}"
    log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [str(prometheus().binary("prometheus")), f"--config.file={work / 'prometheus.yml'}",
         f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2):  # noqa: S310 — loopback
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "Prometheus did not become ready:\n"
                        + (work / "prometheus.log").read_text(errors="replace")[-2000:]
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.kill()
        proc.wait()
        log.close()
        release_window(port)
        shutil.rmtree(work, ignore_errors=True)
