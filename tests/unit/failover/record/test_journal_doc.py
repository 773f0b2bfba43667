"""The journal's typed JSON documents (dr/failover/record/journal_doc.py) name exactly the fields of the
models they are the JSON of, so a field added to one and not the other fails here."""

from __future__ import annotations

from pydantic import BaseModel

from dr.failover.act.integrity import Verdict
from dr.failover.frame.journal import JournalRecord, RunEntry, StepEntry
from dr.failover.record.journal_doc import JournalDocument, RunDocument, StepDocument, VerdictDocument


def _fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


def test_each_document_names_the_fields_of_its_model() -> None:
    assert set(JournalDocument.__annotations__) == _fields(JournalRecord)
    assert set(StepDocument.__annotations__) == _fields(StepEntry)
    assert set(RunDocument.__annotations__) == _fields(RunEntry)
    assert set(VerdictDocument.__annotations__) == _fields(Verdict)


def test_a_journal_record_dumps_to_its_document_keys() -> None:
    record = JournalRecord(
        failover_id="f", stack="s", mode="planned", status="running", source="A", target="B", created_at=1.0,
        original_config={}, desired_config={},
    )  # fmt: skip
    assert set(record.to_json()) == set(JournalDocument.__annotations__)
