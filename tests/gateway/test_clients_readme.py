"""The README's "Clients that work against the gateway" snippets run as written: each
Python block against a real gateway (its address, the admin's key and a fresh pool
put in place of the placeholders), printing what the README's text says; the Spark
block is the s3a configuration the Spark test runs with."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from gateway.clients_support import Gateway, plain, s3a_conf

__all__ = ["plain"]  # fixtures

README = Path(__file__).resolve().parents[2] / "README.md"
#: the placeholders of the README's examples
ENDPOINT = "127.0.0.1:9868"
KEY_ID = "LKIAUKR2LZKS3Q6ATT3G"
SECRET = "pXJaxkmpNdrf3RaeVNEN5svdhuz5mfE0wFMQP5aq"
BUCKET = "imgs"


def blocks(language: str) -> list[str]:
    text = README.read_text()
    section = re.search(
        r"<!-- gateway-clients:begin -->(.*?)<!-- gateway-clients:end -->", text, re.S
    )
    assert section is not None, "the README lost its gateway clients section"
    return re.findall(rf"```{language}\n(.*?)```", section.group(1), re.S)


def placed(code: str, gateway: Gateway, bucket: str) -> str:
    key_id, secret = gateway.key
    code = code.replace(ENDPOINT, gateway.url.split("://", 1)[1])
    code = code.replace(KEY_ID, key_id).replace(SECRET, secret)
    return re.sub(rf"\b{BUCKET}\b", bucket, code)


def test_python_snippets_run(plain: Gateway) -> None:
    code = blocks("python")
    assert len(code) == 3  # pyarrow, obstore, deltalake
    bucket = plain.pool("readme")
    pool = plain.lake().file_pool(bucket)
    pool.branch("dev")
    printed = []
    for block in code:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(placed(block, plain, bucket), "README.md", "exec"), {})  # noqa: S102
        printed.append(out.getvalue())
    assert printed == ["3\n", "b'mi'\n", "1\n"]
    paths = {e.path for e in pool.iter_list("dev")}
    assert {
        "models/m.bin",
        "models/LOCK",
        "tables/sales/_delta_log/00000000000000000001.json",
    } <= paths
    assert pool.stat("models/m.bin", "dev").etag.endswith("-3")  # obstore's 5 MiB parts
    assert any(p.startswith("events/") and p.endswith(".parquet") for p in paths)


def test_spark_conf_is_the_tested_one(plain: Gateway) -> None:
    (conf,) = blocks("properties")
    shown = dict(line.split(None, 1) for line in conf.strip().splitlines())
    tested = s3a_conf(plain)
    key_id, secret = plain.key
    assert {k: placed(v, plain, BUCKET) for k, v in shown.items()} == tested
    assert tested["spark.hadoop.fs.s3a.access.key"] == key_id
    assert tested["spark.hadoop.fs.s3a.secret.key"] == secret
