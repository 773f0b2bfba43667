"""README.md stays a short front page over the documentation site (issue 47): at most 150 lines, the two commands
before anything else, and every relative link pointing at a file of the repository. The site's own links are
checked by ``mkdocs build --strict`` in ``make lint``."""

from __future__ import annotations

import re

from tests import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_LINES = 150
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(text: str) -> list[str]:
    return [target for target in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", target)]


def test_the_readme_fits_in_150_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/ (at most {MAX_LINES})"


def test_the_two_commands_come_first() -> None:
    text = README.read_text(encoding="utf-8")
    first_heading = re.search(r"^## .*$", text, re.MULTILINE)
    assert first_heading and "two commands" in first_heading.group(0)
    assert text.index("make demo") < text.index("make test") < text.index("## ", first_heading.end())


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = _relative_links(README.read_text(encoding="utf-8"))
    assert any(link.startswith("docs/") for link in links), "README.md links into no page of docs/"
    missing = [link for link in links if not (REPO_ROOT / link.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_link_check_sees_a_broken_link() -> None:
    page = "[ok](docs/index.md) [gone](docs/nowhere.md) [web](https://example.org) [here](#top)"
    links = _relative_links(page)
    assert links == ["docs/index.md", "docs/nowhere.md"]
    assert [link for link in links if not (REPO_ROOT / link).exists()] == ["docs/nowhere.md"]
