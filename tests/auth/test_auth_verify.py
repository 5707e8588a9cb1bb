"""``limno verify`` covers the lake's ``auth/`` journal: a damaged entry is a fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from limno.api import Lake

SERVER = "server-secret-for-tests-0123456789"


def test_a_damaged_auth_entry_is_a_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMNO_AUTH_SECRET", SERVER)
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("logs", key="ts")
    assert list(lake.verify()) == []  # no users yet: no auth journal, nothing to check
    lake.auth().create_user("ada", "Developer")
    assert list(lake.verify()) == []
    entry = tmp_path / "lake" / "auth" / "1"
    assert entry.is_file()
    entry.write_bytes(b"{not json")
    faults = [str(f) for f in lake.verify()]
    assert faults and all("auth/1" in f for f in faults), faults
    # one pool's verify is about that pool: the lake's users are not read
    assert list(lake.verify("logs")) == []
