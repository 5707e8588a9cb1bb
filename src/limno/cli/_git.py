"""Git commands: branch, tag, merge, diff, cherry-pick, reset, hook.

A REF argument is ``pool@ref`` or a bare ``ref`` of the pool given by ``-p``
(or ``limno use``); with neither, a bare name is a pool (its ``main``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from limno.cli._context import TIME, Context, format_option, meta_option, pool_option
from limno.cli._output import write_dicts, write_rows, write_tables
from limno.cli._state import working_ref
from limno.core.hooks import EVENTS, HookSpec
from limno.core.merge import STRATEGIES
from limno.errors import InvalidInputError, NotFoundError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core import refs
    from limno.pools import inspect
else:
    pa = lazy_module("pyarrow")
    refs = lazy_module("limno.core.refs")
    inspect = lazy_module("limno.pools.inspect")

__all__ = ["COMMANDS"]


def _working(obj: Context, ref: str | None) -> tuple[str | None, str | None]:
    text = ref or working_ref(obj.lake().uri)
    return refs.parse_pool_ref(text) if text else (None, None)


def _working_branch(obj: Context, ref: str | None, pool: str) -> str | None:
    """The working ref's branch (``-p``, else ``limno use``) if it is a ref of ``pool``.

    A SOURCE or REF naming another pool must not pick up the working pool's
    branch name: its default branch is that pool's ``main``.
    """
    working_pool, at = _working(obj, ref)
    if working_pool is None or at is None:
        return None
    if working_pool == pool:
        return at
    lake = obj.lake()
    try:
        same = lake.versioned_pool(working_pool).id == lake.versioned_pool(pool).id
    except NotFoundError:  # e.g. the working pool was dropped since 'limno use'
        return None
    return at if same else None


def _ref_arg(obj: Context, ref: str | None, text: str) -> tuple[str, str]:
    """``(pool, ref)`` of a REF argument (see the module docstring)."""
    pool, _ = _working(obj, ref)
    if "@" in text:
        named, at = refs.parse_pool_ref(text)
        if (
            pool is not None
            and ref is not None
            and obj.lake().versioned_pool(pool).id != (obj.lake().versioned_pool(named).id)
        ):
            raise InvalidInputError(f"{text!r} is not a ref of pool {pool!r}")
        return named, at or "main"
    if pool is None:
        return text, "main"
    return pool, text


def _named_ref(
    obj: Context,
    ref: str | None,
    kind: str,
    delete: bool,
    from_ref: str | None,
    name: str | None,
    local_fmt: str | None = None,
) -> None:
    """What ``branch`` and ``tag`` share: list, create or delete a named ref."""
    pool_name, at = obj.pool_ref(ref)
    pool = obj.lake().versioned_pool(pool_name)
    if name is None:
        if delete:
            raise InvalidInputError(f"{kind} -d needs a {kind} NAME")
        named = pool.branches() if kind == "branch" else pool.tags()
        fmt = obj.listing_format(local_fmt)
        if fmt is None:  # piped, no format chosen: NAME<TAB>COMMIT lines
            for n, c in named.items():
                click.echo(f"{n}\t{c}")
        elif kind == "branch":
            rules = set(pool.protected())
            rows = [{"name": n, "commit": c, "protected": n in rules} for n, c in named.items()]
            write_dicts(("name", "commit", "protected"), rows, fmt)
        else:
            rows = [{"name": n, "commit": c} for n, c in named.items()]
            write_dicts(("name", "commit"), rows, fmt)
        return
    if delete:
        was = pool.delete_branch(name) if kind == "branch" else pool.delete_tag(name)
        click.echo(f"deleted {kind} {pool.name}@{name} (was {was})", err=True)
        return
    start = from_ref or at or "main"
    commit = pool.branch(name, start) if kind == "branch" else pool.tag(name, start)
    click.echo(f"created {kind} {pool.name}@{name} at {commit} (from {start})", err=True)


@click.command()
@pool_option
@format_option
@click.option("-d", "--delete", is_flag=True, help="Delete branch NAME.")
@click.option("--from", "from_ref", default=None, help="Start point (default: -p's ref or main).")
@click.argument("name", required=False)
@click.argument("target", required=False, metavar="[BRANCH]")
@click.pass_obj
def branch(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    delete: bool,
    from_ref: str | None,
    name: str | None,
    target: str | None,
) -> None:
    """Create branch NAME (O(1): no data is copied), delete it with -d, or list branches.

    \b
    limno branch protect -p POOL BRANCH     only merges (and compaction) may move BRANCH,
                                            and it cannot be deleted
    limno branch unprotect -p POOL BRANCH   lift that
    """
    if name in _PROTECTION and not delete:
        _protection(obj, ref, name, target, from_ref)
        return
    if target is not None:
        raise InvalidInputError(
            f"branch takes one NAME, not {name!r} and {target!r}"
            " (two only in: limno branch protect|unprotect -p POOL BRANCH)"
        )
    _named_ref(obj, ref, "branch", delete, from_ref, name, fmt)


#: the words that make ``limno branch WORD BRANCH`` a protection command
_PROTECTION = ("protect", "unprotect")


def _protection(
    obj: Context, ref: str | None, word: str, target: str | None, from_ref: str | None
) -> None:
    """``limno branch protect|unprotect -p POOL BRANCH`` (see limno.core.protection)."""
    if target is None or from_ref is not None:
        raise InvalidInputError(f"usage: limno branch {word} -p POOL BRANCH")
    pool_name, _ = obj.pool_ref(ref)
    pool = obj.lake().versioned_pool(pool_name)
    where = f"{pool.name}@{target}"
    if word == "protect":
        changed = pool.protect(target)
        said = f"protected {where}: only merges may move it" if changed else None
        click.echo(said or f"{where} was already protected", err=True)
    else:
        changed = pool.unprotect(target)
        click.echo(f"unprotected {where}" if changed else f"{where} was not protected", err=True)


@click.command()
@pool_option
@format_option
@click.option("-d", "--delete", is_flag=True, help="Delete tag NAME.")
@click.option("--from", "from_ref", default=None, help="Commit to tag (default: -p's ref or main).")
@click.argument("name", required=False)
@click.pass_obj
def tag(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    delete: bool,
    from_ref: str | None,
    name: str | None,
) -> None:
    """Create immutable tag NAME, delete it with -d, or list tags."""
    _named_ref(obj, ref, "tag", delete, from_ref, name, fmt)


@click.command()
@pool_option
@click.option("--into", default=None, help="Destination branch (default: -p's branch or main).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="fail", show_default=True)
@click.option("-m", "--message", default="", help="Merge commit message.")
@click.option("--author", default=None)
@meta_option
@click.option("--no-ff", "no_ff", is_flag=True, help="Always make a merge commit.")
@click.argument("source")
@click.pass_obj
def merge(
    obj: Context,
    ref: str | None,
    into: str | None,
    strategy: str,
    message: str,
    author: str | None,
    meta: Sequence[tuple[str, str]],
    no_ff: bool,
    source: str,
) -> None:
    """Merge SOURCE into a branch: fast-forward when possible, else a three-way merge."""
    pool_name, src = _ref_arg(obj, ref, source)
    dest = into or _working_branch(obj, ref, pool_name) or "main"
    pool = obj.lake().versioned_pool(pool_name)
    result = pool.merge(src, dest, strategy, message, author, dict(meta), fast_forward=not no_ff)
    click.echo(result.commit)
    if result.kind == "up-to-date":
        click.echo(f"{pool.name}@{dest} is already up to date with {src}", err=True)
    elif result.kind == "fast-forward":
        click.echo(f"fast-forwarded {pool.name}@{dest} to {src} ({result.commit})", err=True)
    else:
        extra = (
            f", {len(result.resolved)} conflict(s) resolved {strategy}" if result.resolved else ""
        )
        click.echo(f"merged {src} into {pool.name}@{dest} (base {result.base}{extra})", err=True)


@click.command()
@pool_option
@format_option
@click.option("--three-dot", is_flag=True, help="Compare against the merge base of the refs.")
@click.option(
    "--as-of",
    "as_of",
    type=TIME,
    default=None,
    help="Read the refs that are branches as they were at this time.",
)
@click.argument("refs", nargs=-1, required=True)
@click.pass_obj
def diff(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    three_dot: bool,
    as_of: dt.datetime | None,
    refs: Sequence[str],
) -> None:
    """Objects (of a file pool: paths) added, removed or changed from REF1 to REF2.

    With one REF, from the working branch (-p, limno use, else main) to REF.
    """
    if len(refs) > 2:
        raise InvalidInputError("diff takes one or two refs")
    pool_name, new = _ref_arg(obj, ref, refs[-1])
    if len(refs) == 2:
        old_pool, old = _ref_arg(obj, ref, refs[0])
        if obj.lake().versioned_pool(old_pool).id != obj.lake().versioned_pool(pool_name).id:
            raise InvalidInputError("diff compares two refs of one pool")
    else:
        old = _working_branch(obj, ref, pool_name) or "main"
    pool = obj.lake().versioned_pool(pool_name)
    entries = pool.diff(old, new, three_dot=three_dot, as_of=as_of)
    if pool.kind == "files":  # paths, not data objects
        from limno.cli._fs import CHANGE_COLUMNS, diff_rows

        write_dicts(CHANGE_COLUMNS, diff_rows(entries), obj.format(fmt))
    else:
        write_rows(inspect.diff_rows(entries), obj.format(fmt))
    counts = {c: sum(e.change == c for e in entries) for c in ("added", "removed", "changed")}
    dots = "..." if three_dot else ".."
    click.echo(
        f"{pool.name}@{old}{dots}{new}: {counts['added']} added, {counts['removed']} removed,"
        f" {counts['changed']} changed",
        err=True,
    )


@click.command(name="cherry-pick")
@pool_option
@click.option("--strategy", type=click.Choice(STRATEGIES), default="fail", show_default=True)
@click.argument("commit")
@click.pass_obj
def cherry_pick(obj: Context, ref: str | None, strategy: str, commit: str) -> None:
    """Apply the changes of COMMIT to the branch as a new commit."""
    name, branch_name = obj.branch_ref(ref)
    pool = obj.lake().versioned_pool(name)
    made = pool.cherry_pick(commit, branch_name, strategy)
    click.echo(made.id)
    click.echo(
        f"cherry-picked {commit} onto {pool.name}@{branch_name} ({len(made.actions)} action(s))",
        err=True,
    )


@click.command()
@pool_option
@click.option("--hard", is_flag=True, help="Move the branch and drop its staged objects.")
@click.argument("target")
@click.pass_obj
def reset(obj: Context, ref: str | None, hard: bool, target: str) -> None:
    """Point the branch (-p POOL@BRANCH) at TARGET, discarding what came after."""
    if not hard:
        raise InvalidInputError("reset needs --hard (the only mode: branches have no worktree)")
    name, branch_name = obj.branch_ref(ref)
    pool = obj.lake().versioned_pool(name)
    old, new = pool.reset(branch_name, target)
    click.echo(new)
    click.echo(f"reset {pool.name}@{branch_name} from {old} to {new}", err=True)


@click.group()
def hook() -> None:
    """Pre/post commit and merge hooks of a pool (lakeFS actions)."""


@hook.command(name="add")
@pool_option
@click.option("--event", type=click.Choice(EVENTS), required=True)
@click.option("--run", "run", default=None, help="Shell command; a non-zero exit vetoes.")
@click.option("--python", "python", default=None, help="module:function called with the event.")
@click.option("--webhook", default=None, help="http(s) URL the event is POSTed to; non-2xx vetoes.")
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Webhook: seconds to wait for an answer (default 10); then it vetoes.",
)
@click.option(
    "--header", "headers", multiple=True, metavar="K=V", help="Webhook: an extra request header."
)
@click.option(
    "--secret-env",
    default=None,
    metavar="NAME",
    help="Webhook: sign the body (HMAC-SHA256) with the key in this environment variable.",
)
@click.option("--branch", "branches", multiple=True, help="Only on branches matching this glob.")
@click.argument("name")
@click.pass_obj
def hook_add(
    obj: Context,
    ref: str | None,
    event: str,
    run: str | None,
    python: str | None,
    webhook: str | None,
    timeout: float | None,
    headers: Sequence[str],
    secret_env: str | None,
    branches: Sequence[str],
    name: str,
) -> None:
    """Add hook NAME to the pool: a shell command (--run), a Python function (--python)
    or a webhook (--webhook)."""
    pairs = []
    for h in headers:
        key, eq, value = h.partition("=")
        if not eq:
            raise InvalidInputError(f"--header {h!r}: give NAME=VALUE")
        pairs.append((key.strip(), value.strip()))
    pool_name, _ = obj.pool_ref(ref)
    pool = obj.lake().versioned_pool(pool_name)
    spec = HookSpec(
        name,
        event,
        run,
        python,
        tuple(branches),
        webhook=webhook,
        timeout=timeout,
        headers=tuple(pairs),
        secret_env=secret_env,
    )
    pool.add_hook(spec)
    click.echo(f"added {event} hook {name!r} to pool {pool.name}", err=True)


@hook.command(name="ls")
@pool_option
@format_option
@click.pass_obj
def hook_ls(obj: Context, ref: str | None, fmt: str | None) -> None:
    """List the pool's hooks."""
    pool_name, _ = obj.pool_ref(ref)
    specs = obj.lake().versioned_pool(pool_name).hook_specs()
    table = pa.table(
        {
            "name": [s.name for s in specs],
            "event": [s.event for s in specs],
            "run": [_hook_runs(s) for s in specs],
            "branches": [",".join(s.branches) or "*" for s in specs],
        }
    )
    write_tables([table], obj.format(fmt))


def _hook_runs(spec: HookSpec) -> str:
    """What ``hook ls`` shows a hook runs (a webhook's headers stay out: they may hold
    tokens)."""
    if spec.webhook is not None:
        return f"webhook {spec.webhook}"
    return spec.run or f"python {spec.python}"


@hook.command(name="rm")
@pool_option
@click.argument("name")
@click.pass_obj
def hook_rm(obj: Context, ref: str | None, name: str) -> None:
    """Remove hook NAME from the pool."""
    pool_name, _ = obj.pool_ref(ref)
    pool = obj.lake().versioned_pool(pool_name)
    pool.remove_hook(name)
    click.echo(f"removed hook {name!r} from pool {pool.name}", err=True)


COMMANDS = [branch, tag, merge, diff, cherry_pick, reset, hook]
