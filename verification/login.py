"""How Spark's Kafka source logs in to a side: the endpoint's Java client settings as ``kafka.``-prefixed options.

On an OAUTHBEARER cluster the source logs in with Kafka's ``OAuthBearerLoginCallbackHandler`` (its token
endpoint in ``kafka.sasl.oauthbearer.token.endpoint.url``), and the client secret is in no option: it is
written to a 0600 properties file in a 0700 directory of this process (removed when the process ends), which
the JAAS options reference through Kafka's ``FileConfigProvider``. A plan, a log or Spark's UI shows the
reference at most, never the secret. Spark's executors read the file at the same path: on a cluster of other
machines the same file must be there (as for the CA bundle).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

from dr.base.files import write_atomic
from dr.base.java_properties import properties_text
from dr.kafka.client import Endpoint
from dr.kafka.oauth import secret_reference

__all__ = ["spark_login_options"]

_lock = threading.Lock()
_files: dict[tuple[str, str, str], Path] = {}
_dir: list[Path] = []


def _secret_file(token_endpoint: str, endpoint: Endpoint) -> Path:
    """The 0600 file holding ``endpoint``'s client secret (one per identity, written once per process)."""
    key = (token_endpoint, endpoint.username, endpoint.password)
    with _lock:
        if key not in _files:
            if not _dir:
                _dir.append(Path(tempfile.mkdtemp(prefix="kdr-spark-login-")))  # 0700
                atexit.register(shutil.rmtree, _dir[0], True)
            path = _dir[0] / f"client-{len(_files)}.properties"
            write_atomic(path, properties_text({"clientSecret": endpoint.password}), 0o600)
            _files[key] = path
        return _files[key]


def spark_login_options(endpoint: Endpoint) -> dict[str, str]:
    """Spark Kafka source options (``kafka.``-prefixed) that reach and log in to ``endpoint``'s cluster."""
    props = endpoint.java_config()
    if endpoint.uses_oauth and endpoint.oauth is not None:
        reference, provider = secret_reference(str(_secret_file(endpoint.oauth.token_endpoint, endpoint)))
        props = {**endpoint.with_user(endpoint.username, reference).java_config(), **provider}
    return {f"kafka.{k}": v for k, v in props.items()}
