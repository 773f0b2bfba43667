"""The exit-code table: one copy (dr.base.errors.EXIT_CODES), rendered into ``drctl --help`` and the docs' exit-code
page (docs/reference/exit-codes.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import dr.cli
from dr.base.errors import EXIT_CODES, DRError, InternalError, exit_codes_help, exit_codes_markdown

EXIT_CODES_PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "exit-codes.md"
MARKERS = re.compile(r"<!-- exit-codes:begin[^>]*-->\n(.*?)\n<!-- exit-codes:end -->", re.DOTALL)


def _subclasses(cls: type[DRError]) -> list[type[DRError]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def test_the_exit_code_page_holds_the_rendered_table() -> None:
    found = MARKERS.search(EXIT_CODES_PAGE.read_text(encoding="utf-8"))
    assert found, "docs/reference/exit-codes.md lost its <!-- exit-codes:begin --> … <!-- exit-codes:end --> markers"
    assert found.group(1) == exit_codes_markdown(), (
        "docs/reference/exit-codes.md's exit-code table differs from dr.base.errors.EXIT_CODES; put this between its markers:\n"
        + exit_codes_markdown()
    )


def test_every_error_class_exits_with_a_documented_code() -> None:
    documented = {row.code for row in EXIT_CODES}
    listed = {c for row in EXIT_CODES for c in row.classes}
    classes = _subclasses(DRError)  # dr.cli imported every command module, so every subclass is loaded
    assert InternalError in classes
    for cls in classes:
        assert cls.exit_code in documented, f"{cls.__module__}.{cls.__qualname__} exits {cls.exit_code}"
    for cls in listed:
        assert cls.exit_code == next(row.code for row in EXIT_CODES if cls in row.classes)


def test_codes_are_unique_and_ordered() -> None:
    codes = [row.code for row in EXIT_CODES]
    assert codes == sorted(set(codes))
    assert codes[0] == 0 and InternalError.exit_code == 10 and codes[-1] == 130


def test_drctl_help_shows_the_table() -> None:
    out = CliRunner().invoke(dr.cli.cli, ["--help"]).output
    assert exit_codes_help().startswith("\b\n")
    for line in exit_codes_help().splitlines()[1:]:
        assert line.strip() in out
    assert "Exit codes: 0 ok" not in out


def test_a_usage_error_exits_as_bad_input() -> None:
    with pytest.raises(SystemExit) as info:
        dr.cli.main(["estate", "no-such-command"])
    assert info.value.code == 2


def test_main_turns_an_unexpected_exception_into_the_internal_error_code(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))

    def boom(**_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(dr.cli.cli, "main", boom)
    with pytest.raises(SystemExit) as info:
        dr.cli.main([])
    assert info.value.code == InternalError.exit_code
    assert "internal error" in capsys.readouterr().err


def test_the_verification_summary_carries_the_one_table() -> None:
    """summary.json's ``exit_codes`` is rendered from EXIT_CODES, not kept as a second copy (issue 25 §5)."""
    from dr.base.errors import exit_codes_by_code

    table = exit_codes_by_code()
    assert set(table) == {str(row.code) for row in EXIT_CODES}
    assert table["1"] == next(row.meaning for row in EXIT_CODES if row.code == 1)
