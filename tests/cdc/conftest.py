"""Fixtures of the CDC chain: one PostgreSQL, one broker and one Kafka Connect worker
for the module (tests/cdc_chain.py), all on loopback and stopped after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_chain import Chain, parts


@pytest.fixture(scope="module")
def cdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """The chain's parts, its connectors not made yet; stopped (and reaped) after."""
    with parts(Path(tmp_path_factory.mktemp("cdc")), say=lambda line: None) as made:
        yield made
    assert made.pg.proc.poll() is not None
    assert made.broker.proc.poll() is not None
    assert made.connect.proc.poll() is not None
