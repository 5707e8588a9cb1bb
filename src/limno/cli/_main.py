"""The command group, global options and error handling shared by every command.

Every command resolves the lake the same way (``--lake``, ``LIMNO_LAKE``, the
default path) and every LimnoError becomes one ``error: ...`` line on stderr and
exit code 1; usage errors exit 2 (click's convention). Nothing escapes as a
traceback: see :func:`main`.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

import click

from limno.cli._context import Context
from limno.cli._output import FORMATS
from limno.config import configured_lake
from limno.errors import LimnoError, os_reason
from limno.lazy import lazy_module

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from limno import api
else:
    api = lazy_module("limno.api")  # not for --help and usage errors

__all__ = ["COMMAND_MODULES", "cli", "main"]

#: the modules that define the commands (each lists them in its ``COMMANDS``), by command
#: name: a module is imported when one of its commands runs, so that a command builds no
#: other command's options (``--help`` imports them all)
COMMAND_MODULES = {
    name: f"limno.cli.{module}"
    for module, names in (
        ("_pools", "create ls drop rename use"),
        ("_data", "load add commit stage log scan get query delete revert vacuum"),
        ("_git", "branch tag merge diff cherry-pick reset hook"),
        ("_maintenance", "compact split manage status"),
        ("_spark", "spark"),
        ("_serve", "serve"),
        ("_auth", "auth"),
        ("_watch", "watch"),
        ("_config", "config"),
        ("_index", "index"),
        ("_ingest", "ingest"),
        ("_fs", "fs"),
        ("_iterator", "iterator"),
        ("_mr", "mr"),
        ("_kafka", "kafka"),
        ("_etl", "etl"),
    )
    for name in names.split()
}


class _Commands(click.Group):
    """The command group: commands from :data:`COMMAND_MODULES` load when looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            # an unknown name loads them all: click suggests the close ones it holds
            known = COMMAND_MODULES.get(cmd_name)
            for module in [known] if known else sorted(set(COMMAND_MODULES.values())):
                for command in importlib.import_module(module).COMMANDS:
                    self.add_command(command)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--lake",
    "lake",
    metavar="LOCATION",
    default=None,
    help="Lake location (path, file://, s3://bucket/prefix, http(s):// of 'limno serve'). "
    "Default: $LIMNO_LAKE, else the config's lake, else ~/.local/share/limno.",
)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format (default: $LIMNO_FORMAT, else the config's format, else table on a"
    " terminal, ndjson otherwise).",
)
@click.version_option(package_name="limno")
@click.pass_context
def cli(ctx: click.Context, lake: str | None, fmt: str | None) -> None:
    """limno: a versioned, git-like data lake for Python and Spark."""
    ctx.obj = Context(configured_lake(lake), fmt)


@cli.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create a lake at the lake location."""
    lake = api.Lake.init(obj.location)
    click.echo(f"initialized lake at {lake.uri}")


@cli.command()
@click.argument("pool", required=False)
@click.option(
    "--deep",
    is_flag=True,
    help="Also read every data object whole: page checksums, sort order, keys, counts.",
)
@click.pass_obj
def verify(obj: Context, pool: str | None, deep: bool) -> None:
    """Check every invariant of the lake (or of POOL); exit non-zero naming each fault."""
    lake = obj.lake()
    faults = _verify(lake, pool, deep)
    for fault in faults:
        click.echo(f"fault: {fault}", err=True)
    if faults:
        raise LimnoError(f"{len(faults)} fault(s) in lake {lake.uri}")
    click.echo(f"ok: lake {lake.uri} verified")


def _verify(lake: api.Lake, pool: str | None, deep: bool) -> list[object]:
    """The faults of ``lake.verify``; on a terminal, pool by pool under a progress bar
    (the lake's own checks, repeated for each pool, are reported once)."""
    from limno.cli import _progress

    pools: list[str] = []
    if pool is None and _progress._on_terminal():
        with contextlib.suppress(LimnoError):  # a damaged lake: verify says how, below
            pools = [c.name for c in lake.list_pools()]
    if len(pools) < 2:
        with _progress.activity(f"verifying {lake.uri}"):
            return list(lake.verify(pool, deep=deep))
    faults: list[object] = []
    with _progress.counting(f"verifying {lake.uri}", len(pools), "pools") as update:
        for done, name in enumerate(pools, 1):
            faults += [f for f in lake.verify(name, deep=deep) if f not in faults]
            update(done)
    return faults


#: settings of the native libraries that load with pyarrow and numpy, read once when
#: they load (README: "Memory allocator"):
#: mimalloc (pyarrow's allocator) purges freed memory with ``MADV_FREE``, not by
#: decommitting it: the kernel takes the pages back only when it needs them; and
#: OpenBLAS (numpy's) starts no threads: limno does no linear algebra, and each thread
#: OpenBLAS starts when numpy loads spins a while first (a third of a `get`'s CPU)
NATIVE_DEFAULTS = {"MIMALLOC_PURGE_DECOMMITS": "0", "OPENBLAS_NUM_THREADS": "1"}


def native_defaults() -> None:
    """Set :data:`NATIVE_DEFAULTS` in this process's environment, where the user has
    not set them.

    A compaction or load frees and allocates hundreds of MB a second; decommitted
    pages fault in again (zeroed) on the next allocation, about 15% of a repeated
    compaction's CPU. The libraries read their options when they load, so this runs
    before any command imports pyarrow or numpy; the process's children (``serve
    --workers``) inherit it. The library itself leaves a host process's environment
    alone.
    """
    for name, value in NATIVE_DEFAULTS.items():
        os.environ.setdefault(name, value)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; every failure becomes one ``error:`` line and exit 1.

    Library errors arrive as LimnoErrors, already worded where the bytes were read
    or written. A failed write of the command's own output is worded here. Anything
    else is a bug: it still gets one line (the traceback only with ``LIMNO_DEBUG=1``).
    """
    native_defaults()
    with _whole_writes_to_stdout():
        _run(argv)


def _run(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="limno", standalone_mode=False)
        sys.stdout.flush()  # a full disk under redirected output fails here, not at exit
    except click.UsageError as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except LimnoError as e:
        _fail(e, str(e))
    except BrokenPipeError:
        _drop_output()
        sys.exit(1)
    except OSError as e:
        if e.errno is not None and e.filename is None and _raised_by_cli(e):
            _drop_output()
            _fail(e, f"cannot write standard output: {os_reason(e.errno)}")
        _internal(e)
    except Exception as e:
        _internal(e)


def _fail(err: BaseException, message: str) -> NoReturn:
    if os.environ.get("LIMNO_DEBUG"):
        import traceback

        traceback.print_exception(err)
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _internal(err: BaseException) -> NoReturn:
    """The last line of defence: an error no boundary mapped (a bug, to be reported)."""
    text = str(err).strip().splitlines()
    detail = f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
    hint = "" if os.environ.get("LIMNO_DEBUG") else " (set LIMNO_DEBUG=1 for a traceback)"
    _fail(err, f"internal error: {detail}{hint}")


class _WholeWrites(io.RawIOBase):
    """Standard output that writes every byte or raises.

    A write that a full disk (or a file-size limit) cuts short returns a short count,
    which Python's buffered writer passes over: the output would end truncated and
    the command exit 0. Writing the rest raises the OSError that says why.
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: ReadableBuffer) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.write(self._fd, view[done:])
        return done


@contextlib.contextmanager
def _whole_writes_to_stdout() -> Iterator[None]:
    """Run with ``sys.stdout`` writing through :class:`_WholeWrites` (the process's
    own stdout only: a caller that replaced it, like the tests' runner, keeps its own)."""
    out, own, fd = sys.stdout, sys.__stdout__, -1
    if own is not None and out is own:
        with contextlib.suppress(OSError, ValueError):
            fd = own.fileno()
    if fd < 0:
        yield
        return
    out.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_WholeWrites(fd)),
        encoding=out.encoding,
        errors=out.errors,
        line_buffering=bool(out.line_buffering),
    )
    try:
        yield
    finally:
        whole, sys.stdout = sys.stdout, out
        with contextlib.suppress(OSError, ValueError):
            whole.flush()


def _drop_output() -> None:
    """Point stdout at the null device once writing to it failed.

    What is still buffered cannot be written, and flushing it again at exit would
    print a second error (and change the exit code).
    """
    with contextlib.suppress(OSError, ValueError):
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


def _raised_by_cli(err: BaseException) -> bool:
    """Whether the innermost limno code ``err`` passed through is the CLI's own.

    The library maps the OS errors of the lake where it reads and writes, so an
    errno-carrying OSError raised from the command layer itself came from writing
    the command's output (stdout).
    """
    import traceback  # only a failed write gets here

    innermost = ""
    for frame, _ in traceback.walk_tb(err.__traceback__):
        module = frame.f_globals.get("__name__", "")
        if module.startswith("limno."):
            innermost = module
    return innermost.startswith("limno.cli.")
