"""Run the real ``limno`` entry point in-process, capturing bytes and the exit code."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from typing import Any

from limno.cli import main


@dataclass
class Result:
    code: int
    out: bytes
    err: str

    @property
    def text(self) -> str:
        return self.out.decode()

    def rows(self) -> list[dict[str, Any]]:
        """stdout as NDJSON rows."""
        return [json.loads(line) for line in self.out.decode().splitlines() if line.strip()]


class _Out(io.TextIOWrapper):
    def isatty(self) -> bool:
        return False


def run(*args: str, stdin: bytes = b"") -> Result:
    """``limno ARGS...`` with ``stdin``; never raises for a failing command."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    wrappers = (
        _Out(io.BytesIO(stdin), encoding="utf-8"),
        _Out(out, encoding="utf-8", write_through=True),
        _Out(err, encoding="utf-8", write_through=True),
    )
    sys.stdin, sys.stdout, sys.stderr = wrappers
    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        for w in wrappers:
            w.flush()
        sys.stdin, sys.stdout, sys.stderr = saved
        for w in wrappers:
            w.detach()
    return Result(code, out.getvalue(), err.getvalue().decode())


def ok(*args: str, stdin: bytes = b"") -> Result:
    """Run and require success."""
    r = run(*args, stdin=stdin)
    assert r.code == 0, f"limno {' '.join(args)} failed: {r.err}"
    return r


def fail(*args: str, stdin: bytes = b"") -> Result:
    """Run and require failure with a one-line ``error:`` on stderr."""
    r = run(*args, stdin=stdin)
    assert r.code != 0, f"limno {' '.join(args)} unexpectedly succeeded"
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert lines and lines[-1].startswith("error: "), r.err
    return r
