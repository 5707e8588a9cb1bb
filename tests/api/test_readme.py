"""The README's Python API block runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_python_api_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text()
    section = text[text.index("## Python API") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the README lost its Python API example"
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {})  # noqa: S102 - our own README
    assert (tmp_path / "demo-lake" / "lake.json").exists()
