"""Print each test module's seconds in a pytest junit XML as JSON (for tests/module_seconds.json).

    python scripts/module_seconds.py out/junit.xml > tests/module_seconds.json

The suite orders its modules by these figures, longest first (tests/conftest.py ``heaviest_first``).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter


def module_seconds(junit_path: str) -> dict[str, float]:
    """Module path (``tests/x/test_y.py``) → the sum of its test cases' times (setup included)."""
    totals: Counter[str] = Counter()
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        while module and module[-1][:1].isupper():  # a test class, not a module
            module.pop()
        if len(module) > 1 and module[0] == "tests":  # not a collection error's entry
            totals["/".join(module) + ".py"] += float(case.get("time") or 0)
    return {m: round(s) for m, s in totals.most_common()}


if __name__ == "__main__":
    json.dump(module_seconds(sys.argv[1]), sys.stdout, indent=1)
    print()
