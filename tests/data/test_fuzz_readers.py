"""Fuzz the input readers: any bytes in any format load or fail with one clear error.

For every input format, plain and gzip- or zstd-compressed, arbitrary bytes and
mutations (bit flips, truncations, splices) of a small valid file either read into
batches that Arrow's full validation accepts (so no invalid UTF-8 or broken offsets
reach a pool) or raise :class:`InvalidInputError` naming the file. A crash in native
code would kill pytest itself, so one test runs a seeded fuzz loop in a child process
and checks its exit code. Failing examples print a ``@reproduce_failure`` blob; the
child loop prints its seed (rerun it with ``LIMNO_FUZZ_SEED``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import gzip
import io
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.orc as porc
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirunner import run
from limno.data.input_checks import check_schema
from limno.data.readers import read_records
from limno.errors import InvalidInputError

SETTINGS = settings(
    max_examples=75,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FORMATS = ["ndjson", "json", "csv", "tsv", "parquet", "arrow", "arrows", "avro", "orc"]
CODECS = ["plain", "gzip", "zstd"]


def _table() -> pa.Table:
    """A few rows of many types (what the binary seeds hold)."""
    return pa.table(
        {
            "id": pa.array([3, 1, None, 2], pa.int64()),
            "name": ["ada", "bé", None, "ç\u4e2d"],
            "score": [1.5, None, -2.0, 3.25],
            "ok": [True, False, None, True],
            "tags": [["a", "b"], [], None, ["c"]],
            "host": [{"name": "w1", "zone": [1]}, None, {"name": None, "zone": []}, {}],
            "ts": pa.array([1, 2, None, 4], pa.timestamp("ms", "UTC")),
            "price": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50"), None]),
            "attrs": pa.array(
                [[("k", 1)], None, [], [("x", 2), ("y", 3)]], pa.map_(pa.string(), pa.int64())
            ),
        }
    )


def _avro() -> bytes:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["null", "string"]},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "double"}},
            {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A", "B"]}},
            {"name": "raw", "type": {"type": "fixed", "name": "f", "size": 2}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "in",
                "type": {"type": "record", "name": "i", "fields": [{"name": "x", "type": "int"}]},
            },
        ],
    }
    when = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    rows = [
        {"id": i, "name": None if i % 2 else "é", "tags": ["a"] * i, "attrs": {"k": i / 2}}
        | {"kind": "AB"[i % 2], "raw": b"xy", "ts": when, "in": {"x": i}}
        for i in range(4)
    ]
    out = io.BytesIO()
    fastavro.writer(out, schema, rows, codec="null")
    return out.getvalue()


@functools.cache
def seed(fmt: str) -> bytes:
    """A small valid file of ``fmt``."""
    rows = [
        {"id": 1, "s": 'é\\"[', "n": {"a": [1, 2.5], "b": None}, "big": 12345678901234567890},
        {"id": "x", "t": "2026-01-02T03:04:05Z", "l": [[1], []], "o": {"p": None}},
        {"id": 2, "u": "\u00e9\U0001f600", "deep": [{"x": [{"y": 1}]}]},
    ]
    if fmt == "ndjson":
        return "".join(json.dumps(r) + "\n" for r in rows).encode() + b"\n{}\n"
    if fmt == "json":
        return json.dumps(rows, indent=1, ensure_ascii=False).encode()
    if fmt == "csv":
        return 'id,name,note\n1,ada,"a, b"\n2,bé,"two\nlines"\n3,,"q ""x"""\n'.encode()
    if fmt == "tsv":
        return "id\tname\tnote\n1\tada\ta b\n2\tbé\t\n".encode()
    if fmt == "avro":
        return _avro()
    out = io.BytesIO()
    table = _table()
    if fmt == "parquet":
        pq.write_table(table, out, row_group_size=2)
    elif fmt == "orc":
        porc.write_table(table, out, stripe_size=64)
    else:
        opener = ipc.new_file if fmt == "arrow" else ipc.new_stream
        with opener(out, table.schema) as w:
            w.write_table(table, max_chunksize=2)
    return out.getvalue()


def compress(data: bytes, codec: str) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return data


def file_name(fmt: str, codec: str) -> str:
    suffix = {"plain": "", "gzip": ".gz", "zstd": ".zst"}[codec]
    return f"input.{fmt}{suffix}"


def mutate(rng: random.Random, data: bytes) -> bytes:
    """``data`` with bits flipped, cut short, or a stretch replaced or repeated."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["flip", "cut", "splice", "repeat"])
        i = rng.randint(0, len(out))
        if kind == "flip" and i < len(out):
            out[i] ^= 1 << rng.randint(0, 7)
        elif kind == "cut":
            out = out[:i]
        elif kind == "splice":
            out[i : i + rng.randint(0, 16)] = rng.randbytes(rng.randint(0, 16))
        else:
            j = rng.randint(i, min(len(out), i + 64))
            out[i:i] = out[i:j]
    return bytes(out)


def read_checked(path: str) -> int:
    """Rows read from ``path``: every batch must pass Arrow's full validation and the
    nesting limit; any error must be an InvalidInputError that names the file."""
    try:
        batches = list(read_records(path, batch_rows=1000))
    except InvalidInputError as e:
        assert str(e).startswith(f"{path}: "), str(e)
        return -1
    for batch in batches:  # outside the try: these must not raise at all
        batch.validate(full=True)
        check_schema(path, batch.schema)
    return sum(b.num_rows for b in batches)


def load_bytes(directory: str, name: str, data: bytes) -> int:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return read_checked(path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_seeds_are_valid(tmp_path: Path, fmt: str) -> None:
    for codec in CODECS:
        assert load_bytes(str(tmp_path), file_name(fmt, codec), compress(seed(fmt), codec)) > 0


@pytest.mark.parametrize("fmt", FORMATS)
@SETTINGS
@given(data=st.data())
def test_mutated_files_load_or_fail_cleanly(fmt: str, data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(CODECS))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    raw = seed(fmt)
    if data.draw(st.booleans()):  # damage the format itself, or the compressed bytes
        payload = compress(mutate(rng, raw), codec)
    else:
        payload = mutate(rng, compress(raw, codec))
    with tempfile.TemporaryDirectory() as d:
        load_bytes(d, file_name(fmt, codec), payload)


@pytest.mark.parametrize("fmt", [*FORMATS, "unnamed"])
@SETTINGS
@given(raw=st.binary(max_size=512), codec=st.sampled_from(CODECS))
def test_arbitrary_bytes_load_or_fail_cleanly(fmt: str, raw: bytes, codec: str) -> None:
    name = "input" if fmt == "unnamed" else file_name(fmt, codec)
    with tempfile.TemporaryDirectory() as d:
        load_bytes(d, name, compress(raw, codec))


@pytest.mark.parametrize("codec", CODECS)
def test_absurd_sizes_in_arrow_streams_are_refused(tmp_path: Path, codec: str) -> None:
    """A message claiming a petabyte body: the reader's allocation fails (MemoryError)."""
    table = pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]})
    out = io.BytesIO()
    with ipc.new_stream(out, table.schema) as w:
        w.write_table(table)
    data = out.getvalue()
    messages = pa.BufferReader(data)
    ipc.read_message(messages)  # the schema
    size = struct.pack("<q", ipc.read_message(messages).body.size)
    assert data.count(size) == 1  # the batch's bodyLength
    absurd = compress(data.replace(size, struct.pack("<q", 1 << 50)), codec)
    assert load_bytes(str(tmp_path), file_name("arrows", codec), absurd) == -1


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    where = str(tmp_path_factory.mktemp("fuzz") / "lake")
    assert run("--lake", where, "init").code == 0
    assert run("--lake", where, "create", "p", "-k", "id").code == 0
    return where


@settings(SETTINGS, max_examples=12)
@given(fmt=st.sampled_from(FORMATS), codec=st.sampled_from(CODECS), key=st.integers(0, 2**32))
def test_the_cli_prints_one_error_line(lake: str, fmt: str, codec: str, key: int) -> None:
    payload = compress(mutate(random.Random(key), seed(fmt)), codec)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, file_name(fmt, codec))
        with open(path, "wb") as f:
            f.write(payload)
        r = run("--lake", lake, "load", "-p", "p", path)
    lines = [line for line in r.err.splitlines() if line.strip()]
    if r.code:  # the reader names the file (test_mutated_files_load_or_fail_cleanly)
        assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    else:
        assert "record(s)" in r.err


CHILD = """
import os, random, sys, tempfile
import test_fuzz_readers as t
seed, rounds = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
deep = [b'{"a":' + b"[" * n + b"1" + b"]" * n + b"}\\n" for n in (10_000, 200_000)]
deep += [b'[{"a":' * 5_000 + b"1" + b"}]" * 5_000]
with tempfile.TemporaryDirectory() as d:
    for i, data in enumerate(deep):  # would crash pyarrow's parser if it got it
        for codec in t.CODECS:
            name = t.file_name("json" if data.startswith(b"[") else "ndjson", codec)
            assert t.load_bytes(d, name, t.compress(data, codec)) == -1
    for i in range(rounds):
        fmt, codec = rng.choice(t.FORMATS), rng.choice(t.CODECS)
        data = t.mutate(rng, t.seed(fmt))
        t.load_bytes(d, t.file_name(fmt, codec), t.compress(data, codec))
print("ok", flush=True)
"""


@pytest.mark.parametrize(
    "fixed_seed",
    [
        None,  # a new seed each run (printed on failure)
        111,  # an Arrow stream whose list offsets overrun their child: it used to abort
        3888844317,  # an Avro record of no fields in a block of 2^62: it used to spin
        1184810576,  # an Arrow file of a day_time_interval column: pyarrow has no class for it
        314612930,  # an Arrow stream of a union without members (trying it crashed)
        138609704,  # an ORC footer with a decimal of precision 67: pyarrow aborted
    ],
)
def test_a_fuzz_loop_does_not_crash_the_process(fixed_seed: int | None) -> None:
    seed_value = fixed_seed or int(os.environ.get("LIMNO_FUZZ_SEED", random.randrange(2**32)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(seed_value), "400"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    tail = "\n".join(proc.stderr.splitlines()[-15:])
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (
        f"fuzz loop with LIMNO_FUZZ_SEED={seed_value} exited {proc.returncode}:\n{tail}"
    )
