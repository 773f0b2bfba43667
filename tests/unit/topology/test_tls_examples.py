"""Every worked example of runbooks/tls-clusters.md loads through the stack model (so none can rot)."""

from __future__ import annotations

import re

import pytest
import yaml

from dr.base.errors import ConfigError
from dr.topology.model import Cluster, ConnectCluster
from dr.topology.tls_rules import _cluster_problems
from tests import REPO_ROOT

PAGE = REPO_ROOT / "runbooks" / "tls-clusters.md"
EXAMPLES = re.findall(r"<!-- tls-example -->\n```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_page_has_its_five_examples() -> None:
    assert len(EXAMPLES) == 5


@pytest.mark.parametrize("text", EXAMPLES, ids=["private-ca", "mutual-tls", "msk", "confluent-platform", "strimzi"])
def test_each_example_is_a_valid_external_tls_cluster(text: str) -> None:
    (entry,) = yaml.safe_load(text)
    cluster = Cluster.model_validate(entry)
    assert cluster.kind.value == "external" and cluster.security_protocol in ("SASL_SSL", "SSL")
    assert cluster.tls is not None and cluster.tls.ca_file and cluster.tls.hostname_verification
    if cluster.security_protocol == "SSL":
        assert cluster.tls.client_certificate_file and cluster.tls.client_key_file and not cluster.admin_password
    else:
        assert cluster.admin_username and cluster.admin_password is not None
    # the model's TLS rules, but for the files, which exist on the operator's machine only
    problems = [p for p in _cluster_problems("clusters[0]", cluster) if "/etc/kafka-dr/" not in p[1]]
    assert not problems


def test_the_connect_worker_tls_example_declares_the_workers_own_stores() -> None:
    (text,) = re.findall(r"<!-- connect-worker-tls -->\n```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    (entry,) = yaml.safe_load(text)
    connect = ConnectCluster.model_validate(entry)
    assert connect.worker_tls.own_truststore and connect.worker_tls.keystore == "PKCS12"
    with pytest.raises(ConfigError, match=r"worker_tls.truststore: Input should be"):
        ConnectCluster.model_validate({**entry, "worker_tls": {"truststore": "P12"}})
