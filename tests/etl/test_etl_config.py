"""The ``limno etl`` config as a demanding user writes it wrong: each mistake is one
error naming the file, line and field, found before anything is read or committed
(SQL syntax too: a run with no new input still reports it), and SQL that would
escape its place in the run's statements is refused rather than run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from etl_support import CONFIG, batch, records_after
from limno.api.local import LocalLake as Lake
from limno.errors import InvalidInputError
from limno.etl.config import parse_config
from limno.etl.run import run_etl

DEMO = CONFIG.read_text()


def _line(text: str, marker: str) -> int:
    """The last line of ``text`` holding ``marker``."""
    return max(i for i, t in enumerate(text.splitlines(), 1) if marker in t)


def _edited(old: str, new: str) -> str:
    assert old in DEMO, old
    return DEMO.replace(old, new, 1)


_NEW_TOPIC = "{topic: NewInvoices, pool: Staging}"


@pytest.mark.parametrize(
    ("old", "new", "field", "problem"),
    [
        # a select list that is not one (trailing FROM): a parser error, at load
        (
            "input.key AS key, NULL AS value",
            "input.key AS key, NULL AS value FROM",
            "transforms[3].select",
            "Parser Error",
        ),
        # a where that closes the run's parenthesis and ORs itself past the filter of
        # consumed records: refused, not run
        (
            "where: value.op = 'd'",
            "where: value.op = 'd') OR (1=1",
            "transforms[3].where",
            "unbalanced",
        ),
        ("where: value.op = 'd'", 'where: "true; SELECT 1"', "transforms[3].where", "';'"),
        (
            "join-on: left.value.after.ID = right.value.after.InvoiceID",
            "join-on: left.value.after.ID = = right.value.after.InvoiceID",
            "transforms[0].join-on",
            "Parser Error",
        ),
        (
            "select: input.key AS key, input.value.after AS value",
            "select: input.key AS key, (input.value.after AS value",
            "transforms[2].select",
            "unbalanced",
        ),
        # a select list that brings in another table's rows, or dedupes the run's: it
        # parses inside the run's statement, and is refused
        *(
            (
                "input.key AS key, NULL AS value",
                f"input.key AS key, NULL AS value {more}",
                "transforms[3].select",
                "a select list only",
            )
            for more in (
                "FROM other UNION ALL SELECT *,",
                "FROM other WHERE true EXCEPT SELECT *,",
                "FROM (SELECT 1 AS key) AS t INTERSECT SELECT key, value",
            )
        ),
        (
            "input.key AS key, NULL AS value",
            "DISTINCT input.key AS key, NULL AS value",
            "transforms[3].select",
            "a select list only",
        ),
        (_NEW_TOPIC, "{topic: NewInvoices, pool: Stag/ing}", "outputs[0].pool", "invalid pool"),
        (_NEW_TOPIC, "{topic: Invoices, pool: Raw}", "outputs[0].topic", "also an input"),
    ],
)
def test_mistakes_found_at_load(old: str, new: str, field: str, problem: str) -> None:
    text = _edited(old, new)
    if "topic: Invoices" in new:
        text = text.replace("out: NewInvoices", "out: Invoices")
    with pytest.raises(InvalidInputError) as caught:
        parse_config(text, "i.yaml")
    message = str(caught.value)
    assert message.startswith(f"i.yaml line {_line(text, new)}: {field}: "), message
    assert problem in message


def test_the_output_topic_may_be_an_input_of_another_pool() -> None:
    ok = DEMO.replace("{topic: NewInvoices, pool: Staging}", "{topic: Invoices, pool: Staging}")
    parse_config(ok.replace("out: NewInvoices", "out: Invoices"), "i.yaml")


def _lake(root: Path) -> Lake:
    lake = Lake.init(str(root))
    lake.create_pool("Raw", "kafka.offset")
    for n in (1, 2, 3, 4):
        lake.pool("Raw").load([batch(n)])
    return lake


def test_sql_comments_in_fragments(tmp_path: Path) -> None:
    """A ``--`` comment ends at the fragment's end, not at the end of the run's
    statement (it used to swallow the closing parenthesis or the next column)."""
    lake = _lake(tmp_path / "lake")
    text = DEMO.replace("where: value.op = 'd'", "where: value.op = 'd'  -- deletes only")
    text = text.replace(
        "select: input.key AS key, input.value.after AS value",
        "select: input.key AS key, input.value.after AS value -- as it is",
    )
    text = text.replace("right.value.after.InvoiceID", "right.value.after.InvoiceID -- the join")
    run_etl(lake, parse_config(text, "i.yaml"), engine="local")
    assert lake.pool("Staging").scan().to_pylist() == records_after(4)


def test_a_where_that_is_not_a_condition(tmp_path: Path) -> None:
    """``where: 5`` was cast to true by DuckDB: every record passed (7 outputs from
    two batches where the rules make 3). It must be a boolean condition."""
    lake = _lake(tmp_path / "lake")
    text = DEMO.replace("where: value.op = 'd'", "where: 5")
    with pytest.raises(InvalidInputError) as caught:
        run_etl(lake, parse_config(text, "i.yaml"), engine="local")
    line = _line(text, "where: 5")
    assert str(caught.value).startswith(f"i.yaml line {line}: transforms[3].where: ")
    assert "BOOLEAN" in str(caught.value)
    assert lake.pool("Staging").scan().num_rows == 0  # created by the run, left empty


def test_an_output_pool_keyed_otherwise(tmp_path: Path) -> None:
    """An existing output pool keyed on another column: refused, nothing committed
    (the output's order and the completion records need ``kafka.offset``)."""
    lake = _lake(tmp_path / "lake")
    staging = lake.create_pool("Staging", "id")
    seed = pa.table({"id": [1], "kafka": [{"topic": "x", "offset": 0, "timestamp": None}]})
    staging.load([seed.cast(pa.schema([("id", pa.int64()), seed.schema.field("kafka")]))])
    head = staging.resolve("main")
    config = parse_config(DEMO, "i.yaml")
    line = _line(DEMO, "{topic: NewInvoices, pool: Staging}")
    with pytest.raises(
        InvalidInputError, match=rf"^i.yaml line {line}: outputs\[0\].pool: .*keyed on id"
    ):
        run_etl(lake, config, engine="local")
    assert staging.resolve("main") == head
