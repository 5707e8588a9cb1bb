"""``--dead-letter`` naming the target's own branch is refused before anything is read:
the dead letters' commits carry the whole batch's offsets, so on the target's branch
they would pass for its own, and a restart would skip the batch's good records."""

from __future__ import annotations

import pytest

from git_scenarios import init_lake
from limno.api.local import LocalLake
from limno.errors import InvalidInputError
from limno.streams.kafka_from import FromOptions, sync_from

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.mark.parametrize("dead", ["events", "events@main"])
def test_dead_letters_on_the_target_branch_are_refused(lake_path: str, dead: str) -> None:
    lake = LocalLake.open(init_lake(lake_path))
    opts = FromOptions(
        topic="t", pool="events", bootstrap="127.0.0.1:1", dead_letter=dead, exit_after=0.1
    )  # no broker needed: refused before the first read
    with pytest.raises(InvalidInputError, match="dead letters need a pool or branch of their own"):
        sync_from(lake, opts)
    assert lake.list_pools() == []  # refused before anything was made
