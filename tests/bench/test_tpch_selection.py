"""``LIMNO_TPCH_QUERIES`` runs only some TPC-H queries (``4,21``); unset, all 22."""

from __future__ import annotations

import pytest
from bench.tpch import selected
from bench.tpch_queries import queries


def test_all_22_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIMNO_TPCH_QUERIES", raising=False)
    assert list(selected(queries(1.0))) == list(range(1, 23))


def test_the_listed_queries_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMNO_TPCH_QUERIES", "21, 4,21")
    chosen = selected(queries(1.0))
    assert list(chosen) == [4, 21]
    assert chosen[21] == queries(1.0)[21]


def test_an_unknown_query_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMNO_TPCH_QUERIES", "4,23")
    with pytest.raises(ValueError, match="23"):
        selected(queries(1.0))
