"""The Spark driver keeps the optimising compiler unless the footprint profile is chosen (the suite's)."""

from __future__ import annotations

import pytest

from dr.base.errors import ConfigError
from verification.session import driver_jit_options


def test_the_driver_keeps_c2_by_default_and_takes_c1_alone_on_request() -> None:
    assert driver_jit_options({}) == []
    assert driver_jit_options({"KDR_SPARK_JVM_PROFILE": "throughput"}) == []
    assert driver_jit_options({"KDR_SPARK_JVM_PROFILE": "footprint"}) == ["-XX:TieredStopAtLevel=1"]


def test_an_unknown_driver_profile_is_a_config_error_naming_both() -> None:
    with pytest.raises(ConfigError) as info:
        driver_jit_options({"KDR_SPARK_JVM_PROFILE": "turbo"})
    assert "throughput or footprint" in str(info.value.fix)
