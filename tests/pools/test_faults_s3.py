"""The fault walks of load, commit, merge and vacuum on S3 (the loopback moto server).

The same walk as on the local store (``tests/faultsuite.py``), with every third
call faulted plus the last three, to keep the time down. The operation runs on S3
with the fault; what it left there is then downloaded byte for byte and checked
locally (the checks make hundreds of storage calls, each a round trip to the
server). Several calls are walked at once, each on its own copy of the lake.
"""

from __future__ import annotations

import pytest

from faultsuite import FAULTS, SCENARIOS, Place, walk
from s3_support import make_bucket

pytestmark = [pytest.mark.s3, pytest.mark.slow]

ON_S3 = ["load-arrow", "commit", "merge-commit", "vacuum-dropped-branch"]


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Place:
    return Place(tmp_path_factory.mktemp("faults-s3"), f"s3://{make_bucket(s3_endpoint)}/lakes")


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", ON_S3)
def test_a_fault_at_sampled_calls_on_s3(place: Place, name: str, fault: str) -> None:
    outcomes = walk(place, SCENARIOS[name], fault, sample=True, threads=4)
    assert len(outcomes) >= 5
