"""The time grid and the comparison of window sums (pandas, no Spark); the multiset comparison on
DataFrames is in tests/spark/test_verification_compare.py."""

from __future__ import annotations

import pandas as pd

from verification.compare import (
    LATE_WINDOW,
    SOURCE,
    TARGET,
    TimeGrid,
    find_differences,
    window_bounds,
)


def test_time_grid_windows_cover_the_range_and_floor_negatives():
    grid = TimeGrid.spanning({"t": (1000, 1999), "empty": (-1, -1)}, windows=10)
    assert grid.origin["t"] == 1000 and grid.width["t"] == 100
    assert grid.width["empty"] > 0


def test_find_differences_on_identical_sides_is_empty():
    pdf = pd.DataFrame(
        [
            {"side": s, "topic": "t", "partition": 0, "window": 0, "n": 3, "lo": 5, "hi": 7, "omin": 0, "omax": 2}
            for s in (SOURCE, TARGET)
        ]
    )
    diff = find_differences(pdf)
    assert not diff.any and diff.windows == {} and diff.spans == {}
    assert LATE_WINDOW < 0


def test_window_bounds_span_every_topic():
    from verification.compare import Differences

    assert window_bounds(Differences()) is None
    assert window_bounds(Differences(windows={"a": [4, 9], "b": [2]})) == (2, 9)
