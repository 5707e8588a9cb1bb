"""``limno fs``: the files of a file pool, named like ``lakectl fs`` and ``aws s3``.

A file's address is ``POOL[@REF][/PATH]``: pool names and refs hold no ``/``, so the
first ``/`` starts the path (default ref ``main``; writes need a branch, reads take any
ref: a tag, a commit id, ``main~1``, or a branch with ``--as-of``). A path ending in
``/`` (or an empty one) is a prefix: a directory, as ``aws s3`` reads one.

Writes (upload, rm, import) go to the branch's staging area; ``limno commit -p
POOL@BRANCH`` seals them (``fs uncommitted`` shows them, ``fs discard`` drops them).
Uploads of a directory tree run in parallel, with progress on a terminal. Listings
page through the pool (a page of :data:`PAGE` entries at a time), so any number of
paths streams out in bounded memory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click

from limno.cli._context import KEY_VALUE, TIME, Context, format_option
from limno.cli._output import to_json, write_dicts
from limno.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from limno.api import FilePool
    from limno.core.versioning import DiffEntry
    from limno.pools.files.entries import FileChange, FileEntry

__all__ = ["COMMANDS", "PAGE", "WORKERS"]

#: entries asked for per listing page
PAGE = 1000
#: files moved at once by a recursive upload or download
WORKERS = 8
#: the columns of ``fs ls``, ``fs stat``, ``fs uncommitted`` and ``diff`` on files
LS_COLUMNS = ("type", "path", "size", "mtime", "etag", "content_type")
STAT_COLUMNS = ("path", "size", "etag", "content_type", "mtime", "metadata", "s3", "source")
CHANGE_COLUMNS = ("change", "path", "size", "etag", "mtime")


def address(text: str) -> tuple[str, str, str]:
    """``POOL[@REF][/PATH]`` -> ``(pool, ref, path)`` (see the module docstring)."""
    from limno.pools.files.paths import parse_address

    return parse_address(text)


def as_prefix(path: str) -> str:
    """A path named as a directory: ``dir`` and ``dir/`` are both ``dir/`` ('': all)."""
    return path if not path or path.endswith("/") else path + "/"


def _file_pool(obj: Context, pool: str) -> FilePool:
    return obj.lake().file_pool(pool)


def _where(pool: FilePool, ref: str, path: str = "") -> str:
    return f"{pool.name}@{ref}" + (f"/{path}" if path else "")


# -- upload ---------------------------------------------------------------------------------


def _upload_plan(locals_: Sequence[str], path: str, recursive: bool) -> list[tuple[str, str]]:
    """(local file, pool path) of every file an upload sends, checked before any is."""
    single = len(locals_) == 1 and not os.path.isdir(locals_[0])
    if single and path and not path.endswith("/"):
        if not os.path.exists(locals_[0]):  # else sizing it was an internal error
            raise InvalidInputError(f"{locals_[0]}: no such file or directory")
        return [(locals_[0], path)]  # one file to the path named
    prefix = as_prefix(path)
    plan: list[tuple[str, str]] = []
    for local in locals_:
        if os.path.isdir(local):
            if not recursive:
                raise InvalidInputError(f"{local}: is a directory (upload it with -r)")
            root = os.path.basename(os.path.normpath(local)) if len(locals_) > 1 else ""
            for where, dirs, files in os.walk(local):
                dirs.sort()
                rel = os.path.relpath(where, local)
                for name in sorted(files):
                    parts = [p for p in (root, "" if rel == "." else rel, name) if p]
                    key = "/".join(p.replace(os.sep, "/") for p in parts)
                    plan.append((os.path.join(where, name), prefix + key))
        elif os.path.isfile(local):
            plan.append((local, prefix + os.path.basename(local)))
        else:
            raise InvalidInputError(f"{local}: no such file or directory")
    return plan


def _in_parallel(
    label: str, jobs: Sequence[tuple[int, Callable[[], object]]], workers: int = WORKERS
) -> list[object]:
    """Run ``jobs`` (size in bytes, work) on a thread pool with a bar of the bytes done
    on a terminal; their results, in order. The first failure stops what has not begun
    and is raised."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from limno.cli._progress import counting

    total = sum(size for size, _ in jobs)
    results: list[object] = [None] * len(jobs)
    with (
        counting(label, total, "bytes") as update,
        ThreadPoolExecutor(max(1, min(workers, len(jobs)))) as pool,
    ):
        futures = {pool.submit(work): i for i, (_, work) in enumerate(jobs)}
        done = 0
        try:
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                done += jobs[i][0]
                update(done)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return results


@click.command()
@click.option("-r", "--recursive", is_flag=True, help="Upload directories, all they hold.")
@click.option(
    "--content-type",
    default=None,
    help="Content type of every file uploaded (default: guessed from each file's name).",
)
@click.option(
    "--meta", "meta", multiple=True, type=KEY_VALUE, help="User metadata K=V (repeatable)."
)
@click.argument("sources", nargs=-1, required=True, metavar="LOCAL...")
@click.argument("target", metavar="POOL[@BRANCH][/PATH]")
@click.pass_obj
def upload(
    obj: Context,
    recursive: bool,
    content_type: str | None,
    meta: Sequence[tuple[str, str]],
    sources: Sequence[str],
    target: str,
) -> None:
    """Upload LOCAL files (directory trees with -r) to a branch, staged.

    One file goes to PATH itself, unless PATH ends in '/'; several files, or a
    directory, go under PATH as a prefix, keeping their relative paths."""
    name, branch, path = address(target)
    if "-" in sources:
        _upload_stdin(obj, sources, name, branch, path, content_type, dict(meta) or None)
        return
    plan = _upload_plan(sources, path, recursive)
    if not plan:
        raise InvalidInputError("nothing to upload: the directories hold no files")
    import mimetypes

    pool = _file_pool(obj, name)
    metadata = dict(meta) or None

    def job(local: str, key: str) -> Callable[[], object]:
        kind = content_type or mimetypes.guess_type(local)[0]  # as 'aws s3 cp' guesses
        return lambda: pool.put_file(branch, key, local, content_type=kind, metadata=metadata)

    jobs = [(os.path.getsize(local), job(local, key)) for local, key in plan]
    _in_parallel(f"uploading to {_where(pool, branch)}", jobs)
    size = sum(s for s, _ in jobs)
    click.echo(
        f"uploaded {len(plan)} file(s), {size} bytes to {_where(pool, branch, path)}"
        f" (staged: 'limno commit -p {pool.name}@{branch}' commits them)",
        err=True,
    )


def _upload_stdin(
    obj: Context,
    sources: Sequence[str],
    name: str,
    branch: str,
    path: str,
    content_type: str | None,
    metadata: dict[str, str] | None,
) -> None:
    """``fs upload - POOL@BRANCH/PATH``: stdin's bytes, streamed, as one file."""
    if len(sources) != 1 or not path or path.endswith("/"):
        raise InvalidInputError("upload from stdin ('-') takes one POOL[@BRANCH]/PATH to write")
    pool = _file_pool(obj, name)
    entry = pool.put(branch, path, sys.stdin.buffer, content_type=content_type, metadata=metadata)
    click.echo(
        f"uploaded stdin, {entry.size} bytes to {_where(pool, branch, path)} (staged)", err=True
    )


# -- download -------------------------------------------------------------------------------


def _local_parts(path: str, prefix: str) -> tuple[tuple[str, ...], bool]:
    """The local path segments of pool path ``path`` under ``prefix``, and whether it
    is a directory marker (``dir/``, as S3 consoles and s3a make: a directory, no file
    of its own; the prefix's own marker is the target itself); InvalidInputError for
    a path that cannot be a local file's without climbing out of the target."""
    rel = path[len(prefix) :]
    marker = rel.endswith("/") or not rel
    parts = tuple(rel[:-1].split("/") if rel.endswith("/") else rel.split("/")) if rel else ()
    if any(p in ("", ".", "..") or os.sep in p or "\x00" in p for p in parts):
        raise InvalidInputError(f"cannot download {path!r}: not a safe local file name")
    return parts, marker


def _download_plan(
    entries: Iterator[FileEntry], prefix: str
) -> tuple[list[tuple[FileEntry, tuple[str, ...]]], list[tuple[str, ...]]]:
    """The files to write (entry, local segments) and the directories the markers
    make, refusing up front (before a byte is written) a path that is a file and
    also a directory holding another (``a`` and ``a/b``: S3 allows both)."""
    files: list[tuple[FileEntry, tuple[str, ...]]] = []
    dirs: dict[tuple[str, ...], str] = {}
    for entry in entries:
        parts, marker = _local_parts(entry.path, prefix)
        if marker:
            dirs.setdefault(parts, entry.path)
        else:
            files.append((entry, parts))
        for i in range(1, len(parts)):
            dirs.setdefault(parts[:i], entry.path)
    for entry, parts in files:
        if parts in dirs:
            raise InvalidInputError(
                f"cannot download {prefix or '/'}: {entry.path!r} is a file and a directory"
                f" ({dirs[parts]!r}); download them one at a time"
            )
    return files, list(dirs)


def _save(chunks: Iterator[bytes], dest: str, entry: FileEntry) -> int:
    """Write ``chunks`` to ``dest`` atomically (a temporary file renamed when whole),
    checking the bytes against the entry's size and ETag."""
    import hashlib
    import tempfile

    directory = os.path.dirname(dest) or "."
    digest, size = hashlib.md5(usedforsecurity=False), 0
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".limno-download-")
    except OSError as e:
        raise _unwritable(dest, e) from e
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        md5 = re.fullmatch(r"[0-9a-f]{32}", entry.etag) is not None  # not multipart, imported
        whole = size == entry.size and (not md5 or digest.hexdigest() == entry.etag)
        if not whole:
            raise InvalidInputError(
                f"{entry.path}: the bytes read do not match its entry (changed while read?)"
            )
        try:
            os.replace(tmp, dest)
        except OSError as e:
            raise _unwritable(dest, e) from e
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return size


@click.command()
@click.option("-r", "--recursive", is_flag=True, help="Download every file under PATH.")
@click.option("--as-of", "as_of", type=TIME, default=None, help="The branch as it was then.")
@click.argument("source", metavar="POOL[@REF]/PATH")
@click.argument("local", required=False, metavar="[LOCAL]")
@click.pass_obj
def download(
    obj: Context, recursive: bool, as_of: dt.datetime | None, source: str, local: str | None
) -> None:
    """Download a file to LOCAL (default: its name, here; '-': stdout), or with -r every
    file under PATH into directory LOCAL (default: here), keeping relative paths."""
    name, ref, path = address(source)
    pool = _file_pool(obj, name)
    if not recursive:
        if not path or path.endswith("/"):
            raise InvalidInputError(f"{source}: name a file (or a prefix with -r)")
        entry = pool.stat(path, ref, as_of)
        if local == "-":
            _cat(pool, entry, ref, as_of)
            return
        dest = local or path.rsplit("/", 1)[-1]
        if os.path.isdir(dest):
            dest = os.path.join(dest, path.rsplit("/", 1)[-1])
        size = _save(pool.read(path, ref, as_of), dest, entry)
        click.echo(f"downloaded {_where(pool, ref, path)} to {dest} ({size} bytes)", err=True)
        return
    prefix = as_prefix(path)
    target = local or "."
    files, dirs = _download_plan(_entries(pool, ref, prefix, as_of), prefix)
    plan = [(entry, os.path.join(target, *parts)) for entry, parts in files]
    for parts in dirs:
        _make_dir(os.path.join(target, *parts))

    def job(entry: FileEntry, dest: str) -> Callable[[], object]:
        return lambda: _save(pool.read(entry.path, ref, as_of), dest, entry)

    jobs = [(entry.size, job(entry, dest)) for entry, dest in plan]
    _in_parallel(f"downloading {_where(pool, ref, prefix)}", jobs)
    total = sum(e.size for e, _ in plan)
    click.echo(
        f"downloaded {len(plan)} file(s), {total} bytes from {_where(pool, ref, prefix)}"
        f" to {target}",
        err=True,
    )


def _make_dir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise _unwritable(path, e) from e


def _unwritable(dest: str, e: OSError) -> InvalidInputError:
    """The one line for a local file or directory a download cannot make."""
    if isinstance(e, FileExistsError):
        if e.filename == dest:
            return InvalidInputError(f"cannot make directory {dest}: a file is in the way")
        return InvalidInputError(f"cannot write {dest}: {e.filename} is a file, not a directory")
    where = f" ({e.filename})" if e.filename and e.filename != dest else ""
    return InvalidInputError(f"cannot write {dest}: {e.strerror or e}{where}")


def _entries(
    pool: FilePool, ref: str, prefix: str, as_of: dt.datetime | None
) -> Iterator[FileEntry]:
    """Every entry under ``prefix``, a page at a time (:meth:`FilePool.pages`: of one
    commit while the branch stays)."""
    for page in pool.pages(ref, prefix, None, as_of, PAGE):
        yield from page.entries


def _cat(pool: FilePool, entry: FileEntry, ref: str, as_of: dt.datetime | None) -> None:
    out = sys.stdout.buffer
    for chunk in pool.read(entry.path, ref, as_of):
        out.write(chunk)
    out.flush()


@click.command()
@click.option("--as-of", "as_of", type=TIME, default=None, help="The branch as it was then.")
@click.argument("source", metavar="POOL[@REF]/PATH")
@click.pass_obj
def cat(obj: Context, as_of: dt.datetime | None, source: str) -> None:
    """Write a file's bytes to stdout."""
    name, ref, path = address(source)
    if not path:
        raise InvalidInputError(f"{source}: name a file (POOL[@REF]/PATH)")
    pool = _file_pool(obj, name)
    chunks = pool.read(path, ref, as_of)
    first = next(chunks, b"")  # a missing file fails before any output
    out = sys.stdout.buffer
    out.write(first)
    for chunk in chunks:
        out.write(chunk)
    out.flush()


# -- listing and stat -----------------------------------------------------------------------


def _ls_rows(
    pool: FilePool, ref: str, prefix: str, recursive: bool, as_of: dt.datetime | None
) -> Iterator[dict[str, Any]]:
    """Rows of ``fs ls``, in path order: entries, and (without ``recursive``) the
    prefixes the ``/`` delimiter rolls paths up into (:meth:`FilePool.pages`)."""
    for page in pool.pages(ref, prefix, None if recursive else "/", as_of, PAGE):
        rows = [_entry_row(e) for e in page.entries]
        rows += [{"type": "prefix", "path": p} for p in page.prefixes]
        yield from sorted(rows, key=lambda r: str(r["path"]))


def _entry_row(e: FileEntry) -> dict[str, Any]:
    return {
        "type": "object",
        "path": e.path,
        "size": e.size,
        "mtime": e.mtime,
        "etag": e.etag,
        "content_type": e.content_type,
    }


@click.command(name="ls")
@format_option
@click.option("-r", "--recursive", is_flag=True, help="Every path under PREFIX (no '/' roll-up).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N rows.")
@click.option("--as-of", "as_of", type=TIME, default=None, help="The branch as it was then.")
@click.argument("target", metavar="POOL[@REF][/PREFIX]")
@click.pass_obj
def ls(
    obj: Context,
    fmt: str | None,
    recursive: bool,
    limit: int | None,
    as_of: dt.datetime | None,
    target: str,
) -> None:
    """List the files under PREFIX; paths past the next '/' are rolled up into prefix
    rows ('dir/') unless -r. PREFIX is a directory when it ends in '/' (or is empty)."""
    name, ref, prefix = address(target)
    pool = _file_pool(obj, name)
    rows = _ls_rows(pool, ref, prefix, recursive, as_of)
    if limit is not None:
        import itertools

        rows = itertools.islice(rows, limit)
    fmt = obj.format(fmt)
    if fmt == "ndjson":  # streamed, page by page
        out = sys.stdout.buffer
        for row in rows:
            out.write(to_json(row).encode() + b"\n")
        out.flush()
        return
    write_dicts(LS_COLUMNS, list(rows), fmt)


@click.command()
@format_option
@click.option("--as-of", "as_of", type=TIME, default=None, help="The branch as it was then.")
@click.argument("target", metavar="POOL[@REF]/PATH")
@click.pass_obj
def stat(obj: Context, fmt: str | None, as_of: dt.datetime | None, target: str) -> None:
    """A file's entry: size, ETag, content type, mtime, user metadata, what the S3
    gateway keeps with it (standard headers, a verified checksum, part sizes), and
    where its bytes are (a blob limno wrote, or the URI of an imported object)."""
    name, ref, path = address(target)
    if not path:
        raise InvalidInputError(f"{target}: name a file (POOL[@REF]/PATH)")
    e = _file_pool(obj, name).stat(path, ref, as_of)
    row = {
        "path": e.path,
        "size": e.size,
        "etag": e.etag,
        "content_type": e.content_type,
        "mtime": e.mtime,
        # the gateway's reserved names start with ":", which no user metadata name has
        "metadata": {k: v for k, v in e.metadata.items() if not k.startswith(":")},
        "s3": {k[1:]: v for k, v in e.metadata.items() if k.startswith(":")},
        "source": e.uri or f"object {e.object}",
    }
    write_dicts(STAT_COLUMNS, [row], obj.format(fmt))


# -- removing, importing, staged changes ----------------------------------------------------


@click.command()
@click.option("-r", "--recursive", is_flag=True, help="Remove every file under PATH.")
@click.argument("targets", nargs=-1, required=True, metavar="POOL[@BRANCH]/PATH...")
@click.pass_obj
def rm(obj: Context, recursive: bool, targets: Sequence[str]) -> None:
    """Remove files from a branch (staged), or with -r every file under each PATH (a
    directory: 'dir' removes 'dir/...'). A missing file fails, removing nothing."""
    found = [address(t) for t in targets]
    pools: dict[str, FilePool] = {}
    for name, branch, path in found:
        pool = pools.get(name) or pools.setdefault(name, _file_pool(obj, name))
        if not recursive:
            if not path:
                raise InvalidInputError(f"{name}@{branch}: name a file (or a prefix with -r)")
            pool.stat(path, branch)  # NotFoundError before anything is removed
    removed = 0
    for name, branch, path in found:
        pool = pools[name]
        if recursive:
            gone = pool.remove_prefix(branch, as_prefix(path))
        else:
            gone = pool.remove(branch, [path])
        removed += len(gone)
        click.echo(f"removed {len(gone)} file(s) from {_where(pool, branch, path)}", err=True)
    if recursive and not removed:
        raise NotFoundError(f"no files under {', '.join(targets)}")


@click.command(name="import")
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None, help="Commit author (default: the current user).")
@click.argument("source", metavar="SOURCE")
@click.argument("target", metavar="POOL[@BRANCH][/PREFIX]")
@click.pass_obj
def import_(obj: Context, message: str, author: str | None, source: str, target: str) -> None:
    """Register every object under SOURCE (s3://bucket/prefix/ or a local directory) as
    files under PREFIX, in one commit, without copying them; vacuum never deletes them.
    Through a server, SOURCE is read by the server (an admin's operation)."""
    name, branch, prefix = address(target)
    if "://" not in source:
        source = os.path.abspath(source)
    pool = _file_pool(obj, name)
    made = pool.import_from(source, branch, as_prefix(prefix), message, author)
    click.echo(made.id)
    click.echo(
        f"imported {len(made.actions)} file(s) from {source} into"
        f" {_where(pool, branch, as_prefix(prefix))} (by reference: no bytes copied)",
        err=True,
    )


def change_rows(changes: Sequence[FileChange]) -> list[dict[str, Any]]:
    """Rows of ``fs uncommitted`` and of ``limno diff`` on a file pool."""
    rows = []
    for c in changes:
        e = c.new if c.new is not None else c.old
        rows.append(
            {
                "change": c.change,
                "path": c.path,
                "size": None if e is None else e.size,
                "etag": None if e is None else e.etag,
                "mtime": None if e is None else e.mtime,
            }
        )
    return rows


def diff_rows(entries: Sequence[DiffEntry]) -> list[dict[str, Any]]:
    """Rows of ``limno diff`` on a file pool: its entries are paths."""
    from limno.pools.files.entries import FileEntry

    rows = []
    for d in entries:
        e = FileEntry.from_value(d.key, d.new if d.new is not None else d.old or {})
        row = {"change": d.change, "path": d.key, "size": e.size, "etag": e.etag}
        rows.append({**row, "mtime": e.mtime})
    return rows


@click.command()
@format_option
@click.argument("target", metavar="POOL[@BRANCH][/PREFIX]")
@click.pass_obj
def uncommitted(obj: Context, fmt: str | None, target: str) -> None:
    """The staged changes of a branch (under PREFIX): paths added, removed, changed."""
    name, branch, prefix = address(target)
    pool = _file_pool(obj, name)
    changes = pool.uncommitted(branch, prefix)
    write_dicts(CHANGE_COLUMNS, change_rows(changes), obj.format(fmt))
    click.echo(f"{_where(pool, branch, prefix)}: {len(changes)} uncommitted change(s)", err=True)


@click.command()
@click.option("--prefix", default=None, help="Only the changes under this prefix.")
@click.argument("target", metavar="POOL[@BRANCH][/PREFIX]")
@click.pass_obj
def discard(obj: Context, prefix: str | None, target: str) -> None:
    """Drop the staged changes of a branch (all, or under PREFIX)."""
    name, branch, path = address(target)
    if prefix is not None and path:
        raise InvalidInputError("give the prefix once: in the address or as --prefix")
    under = prefix if prefix is not None else path
    pool = _file_pool(obj, name)
    n = pool.discard(branch, under)
    click.echo(f"discarded {n} staged change(s) on {_where(pool, branch, under)}", err=True)


@click.group()
def fs() -> None:
    """Files of a file pool: upload, download, ls, cat, stat, rm, import, uncommitted,
    discard. Addresses are POOL[@REF][/PATH]; writes are staged until 'limno commit'."""


for _command in (upload, download, ls, cat, stat, rm, import_, uncommitted, discard):
    fs.add_command(_command)

COMMANDS = [fs]
