"""The fencing token's check before an automatic failover promotes (:mod:`dr.controller.token`): the run goes on
only while the witness holds the lease with the token it was started with; no answer is no."""

from __future__ import annotations

import pytest

from dr.base.errors import ClusterError, ConfigError, FailoverError
from dr.controller.token import lease_guard, require_token
from dr.controller.witness import Holding
from dr.failover.frame.step import FailoverOptions
from dr.topology import load_stack_file
from tests import REPO_ROOT


class _Witness:
    def __init__(self, current: Holding | Exception | None) -> None:
        self._current = current

    def describe(self) -> str:
        return "etcd http://127.0.0.1:2379"

    def current(self) -> Holding | None:
        if isinstance(self._current, Exception):
            raise self._current
        return self._current


def test_the_holder_of_the_token_goes_on() -> None:
    require_token(_Witness(Holding("ctl-B1/B", 41, 0.0)), 41, "prod")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("current", "said"),
    [
        (Holding("ctl-B2/B", 57, 0.0), "the lease moved on: ctl-B2/B holds it with token 57"),
        (Holding("ctl-A/A", 12, 0.0), "the lease moved on: ctl-A/A holds it with token 12"),  # an older token too
        (None, "the lease moved on: nobody holds it"),
        (ClusterError("etcd: no member answered", "start etcd"), "does not answer to confirm it still holds"),
    ],
)
def test_anything_but_the_same_token_refuses_before_promoting(current: object, said: str) -> None:
    with pytest.raises(FailoverError) as caught:
        require_token(_Witness(current), 41, "prod")  # type: ignore[arg-type]
    assert said in caught.value.problem and "token 41" in caught.value.problem
    assert "nothing was promoted" in (caught.value.fix or "") and "drctl failover --stack prod --yes" in (
        caught.value.fix or ""
    )


def test_a_token_for_a_stack_without_a_witness_is_a_configuration_error() -> None:
    topology = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    assert topology.failover_policy.witness is None
    with pytest.raises(ConfigError, match="declares no witness"):
        lease_guard("local", topology, 7)


def test_the_check_is_never_journaled_with_the_options() -> None:
    options = FailoverOptions(mode="unplanned", fencing_token=7, lease_check=lambda: None)
    assert options.to_dict()["fencing_token"] == 7 and "lease_check" not in options.to_dict()
