"""Hooks through the CLI (in-process, real entry point): shell and Python hooks that
veto or notify, branch globs, validation; and a hook registered in-process.

Every scenario ends with ``limno verify`` passing (the ``lake`` fixture checks it on
teardown).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from clirunner import run
from git_scenarios import Lk, error_line
from lake_modes import local_only
from limno.api.local import LocalLake as Lake
from limno.errors import HookVetoError

# -- hooks ----------------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("isolated_home")


def test_pre_commit_shell_hook_vetoes(forked: Lk) -> None:
    lk = forked
    r = lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--run",
        "echo 'loads are frozen' >&2; exit 1",
        "freeze",
    )
    assert "added pre-commit hook 'freeze'" in r.err
    hooks = lk.ok("hook", "ls", "-p", "logs").rows()
    assert hooks == [
        {
            "name": "freeze",
            "event": "pre-commit",
            "run": "echo 'loads are frozen' >&2; exit 1",
            "branches": "*",
        }
    ]
    head, n = lk.head("main"), len(lk.log("logs"))
    r = lk.fail("load", "-p", "logs", lk.file([{"ts": 9}]))
    assert r.text == ""
    assert "loads are frozen" in error_line(r) and "freeze" in error_line(r)
    assert "loads are frozen" in error_line(lk.fail("delete", "-p", "logs", "--where", "ts = 1"))
    assert lk.head("main") == head and len(lk.log("logs")) == n
    assert lk.ts("logs") == [1, 2, 3]
    # the hook runs on every branch without --branch
    assert "loads are frozen" in error_line(lk.fail("load", "-p", "logs@dev", lk.file([{"ts": 9}])))
    assert "already has a hook" in error_line(
        lk.fail("hook", "add", "-p", "logs", "--event", "pre-commit", "--run", "true", "freeze")
    )
    r = lk.ok("hook", "rm", "-p", "logs", "freeze")
    assert "removed hook 'freeze'" in r.err
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []
    lk.load("logs", [9])
    assert lk.ts("logs") == [1, 2, 3, 9]
    assert "no hook" in error_line(lk.fail("hook", "rm", "-p", "logs", "freeze"))


def test_hook_without_output_reports_exit_status(forked: Lk) -> None:
    lk = forked
    lk.ok("hook", "add", "-p", "logs", "--event", "pre-commit", "--run", "exit 3", "quiet")
    assert "exit status 3" in error_line(lk.fail("load", "-p", "logs", lk.file([{"ts": 9}])))


def test_pre_merge_hook_vetoes(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-merge",
        "--run",
        'echo "no merges from $LIMNO_SOURCE"; exit 1',
        "gate",
    )
    main = lk.head("main")
    r = lk.fail("merge", "-p", "logs", "dev")
    assert r.text == ""
    assert "no merges from dev" in error_line(r)
    assert lk.head("main") == main and lk.ts("logs") == [1, 2, 3]
    # commits are not merges: loading still works
    lk.load("logs", [20])
    lk.ok("hook", "rm", "-p", "logs", "gate")
    lk.ok("merge", "-p", "logs", "dev")
    assert lk.ts("logs") == [1, 2, 3, 10, 20]


def test_hook_branch_glob(forked: Lk) -> None:
    lk = forked
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--branch",
        "release-*",
        "--branch",
        "prod",
        "--run",
        "echo release branches are read-only >&2; exit 1",
        "ro",
    )
    assert lk.ok("hook", "ls", "-p", "logs").rows()[0]["branches"] == "release-*,prod"
    lk.ok("branch", "-p", "logs", "release-1")
    lk.ok("branch", "-p", "logs", "prod")
    lk.ok("branch", "-p", "logs", "prerelease-1")
    lk.load("logs", [4])
    lk.load("logs@dev", [5])
    lk.load("logs@prerelease-1", [6])
    for branch in ("release-1", "prod"):
        head = lk.head(branch)
        r = lk.fail("load", "-p", f"logs@{branch}", lk.file([{"ts": 9}]))
        assert "read-only" in error_line(r)
        assert lk.head(branch) == head
    # a merge into a guarded branch is not a commit hook's business
    lk.ok("merge", "-p", "logs", "dev", "--into", "release-1")
    assert lk.ts("logs@release-1") == [1, 2, 3, 5]


def test_pre_merge_hook_branch_glob(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    lk.ok("branch", "-p", "logs", "staging")
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-merge",
        "--branch",
        "main",
        "--run",
        "echo main is frozen; exit 1",
        "mainonly",
    )
    r = lk.ok("merge", "-p", "logs", "dev", "--into", "staging")
    assert "fast-forwarded logs@staging" in r.err
    main = lk.head("main")
    assert "main is frozen" in error_line(lk.fail("merge", "-p", "logs", "staging"))
    assert lk.head("main") == main


def test_post_commit_and_post_merge_shell_hooks(forked: Lk, tmp_path: Path) -> None:
    lk = forked
    out = tmp_path / "post-commit.txt"
    event = tmp_path / "event.json"
    merged = tmp_path / "post-merge.txt"
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "post-commit",
        "--run",
        f'echo "$LIMNO_COMMIT $LIMNO_BRANCH $LIMNO_POOL" >> {out}; cat > {event}',
        "notify",
    )
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "post-merge",
        "--run",
        f'echo "$LIMNO_COMMIT $LIMNO_KIND $LIMNO_SOURCE" >> {merged}',
        "merged",
    )
    commit = lk.load("logs@dev", [10], "-m", "hello")
    assert out.read_text() == f"{commit} dev logs\n"
    payload = json.loads(event.read_text())
    assert payload["event"] == "post-commit"
    assert payload["commit"] == commit and payload["branch"] == "dev"
    assert payload["message"] == "hello" and payload["pool"] == "logs"
    ff = lk.ok("merge", "-p", "logs", "dev").text.strip()
    assert merged.read_text() == f"{ff} fast-forward dev\n"
    assert out.read_text() == f"{commit} dev logs\n"  # a merge is not a commit
    # a failing post hook is only a notification: the commit stands
    lk.ok("hook", "add", "-p", "logs", "--event", "post-commit", "--run", "exit 1", "broken")
    second = lk.load("logs", [11])
    assert lk.head("main") == second
    assert out.read_text().splitlines()[-1] == f"{second} main logs"


@local_only("the hook's module and what it records live in the test's process")
def test_python_hook(forked: Lk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lk = forked
    mod = tmp_path / "pyhooks_git_cli.py"
    mod.write_text(
        "SEEN = []\n"
        "def veto(event):\n"
        "    raise RuntimeError('python says no to ' + event['branch'])\n"
        "def record(event):\n"
        "    SEEN.append(event)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pyhooks_git_cli", raising=False)
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--python",
        "pyhooks_git_cli:veto",
        "--branch",
        "dev",
        "pyveto",
    )
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-merge",
        "--python",
        "pyhooks_git_cli:record",
        "rec",
    )
    listed = {h["name"]: h["run"] for h in lk.ok("hook", "ls", "-p", "logs").rows()}
    assert listed == {
        "pyveto": "python pyhooks_git_cli:veto",
        "rec": "python pyhooks_git_cli:record",
    }
    head = lk.head("dev")
    r = lk.fail("load", "-p", "logs@dev", lk.file([{"ts": 9}]))
    assert "python says no to dev" in error_line(r)
    assert lk.head("dev") == head
    lk.load("logs", [4])
    lk.ok("merge", "-p", "logs", "main", "--into", "dev")
    seen = importlib.import_module("pyhooks_git_cli").SEEN
    assert len(seen) == 1
    assert seen[0]["event"] == "pre-merge" and seen[0]["branch"] == "dev"
    assert seen[0]["source"] == "main"
    lk.ok("hook", "rm", "-p", "logs", "pyveto")
    lk.load("logs@dev", [9])
    r = lk.fail("hook", "add", "-p", "logs", "--event", "pre-commit", "--python", "nocolon", "x")
    assert "module:function" in error_line(r)
    # a python hook whose module cannot be imported vetoes (it cannot say yes)
    lk.ok("hook", "add", "-p", "logs", "--event", "pre-commit", "--python", "no_such_mod:f", "gone")
    assert "gone" in error_line(lk.fail("load", "-p", "logs", lk.file([{"ts": 8}])))


def test_hook_add_validation(forked: Lk) -> None:
    lk = forked
    both = lk.fail(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--run",
        "true",
        "--python",
        "m:f",
        "x",
    )
    assert "exactly one" in error_line(both)
    assert "exactly one" in error_line(
        lk.fail("hook", "add", "-p", "logs", "--event", "pre-commit", "x")
    )
    bad_event = run(
        "--lake", lk.lake, "hook", "add", "-p", "logs", "--event", "pre-push", "--run", "true", "x"
    )
    assert bad_event.code == 2
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []


def test_in_process_pre_merge_hook(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    pool = Lake.open(lk.path).pool("logs")  # a hook of this process: on the lake itself
    seen: list[dict[str, Any]] = []

    def gate(event: dict[str, Any]) -> None:
        seen.append(event)
        if event["source"] == "dev":
            raise ValueError("dev is not ready")

    pool.hooks.register("pre-merge", gate)
    main = lk.head("main")
    with pytest.raises(HookVetoError, match="dev is not ready"):
        pool.merge("dev", "main")
    assert lk.head("main") == main
    assert seen[0]["branch"] == "main" and seen[0]["strategy"] == "fail"
    # a hook registered in-process is not persisted: the CLI merges
    lk.ok("merge", "-p", "logs", "dev")
    assert lk.ts("logs") == [1, 2, 3, 10]
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []
