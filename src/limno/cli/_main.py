"""The command group, global options and error handling shared by every command.

Every command resolves the lake the same way (``--lake``, ``LIMNO_LAKE``, the
default path) and every LimnoError becomes one ``error: ...`` line on stderr and
exit code 1; usage errors exit 2 (click's convention).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from limno.cli._output import FORMATS, default_format
from limno.cli._state import working_ref
from limno.config import lake_location
from limno.core.refs import parse_pool_ref
from limno.errors import InvalidInputError, LimnoError
from limno.lake import Lake

__all__ = ["Context", "cli", "main"]


@dataclass
class Context:
    """What every command gets: the lake location (opened on demand), output format."""

    location: str
    fmt: str | None = None
    _lake: Lake | None = None

    def lake(self) -> Lake:
        if self._lake is None:
            self._lake = Lake.open(self.location)
        return self._lake

    def format(self, local: str | None = None) -> str:
        return local or self.fmt or default_format()

    def pool_ref(self, ref: str | None) -> tuple[str, str | None]:
        """``(pool, ref)`` from ``-p POOL[@REF]``, else from ``limno use``."""
        text = ref or working_ref(self.lake().uri)
        if not text:
            raise InvalidInputError("no pool given: pass -p POOL[@REF] or run 'limno use POOL'")
        return parse_pool_ref(text)

    def branch_ref(self, ref: str | None) -> tuple[str, str]:
        """``(pool, branch)`` for commands that write (default branch ``main``)."""
        pool, at = self.pool_ref(ref)
        return pool, at or "main"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--lake",
    "lake",
    metavar="LOCATION",
    default=None,
    help="Lake location (path, file://, s3://bucket/prefix). "
    "Default: $LIMNO_LAKE, else ~/.local/share/limno.",
)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format (default: table on a terminal, ndjson otherwise).",
)
@click.version_option(package_name="limno")
@click.pass_context
def cli(ctx: click.Context, lake: str | None, fmt: str | None) -> None:
    """limno: a versioned, git-like data lake for Python and Spark."""
    ctx.obj = Context(lake_location(lake), fmt)


@cli.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create a lake at the lake location."""
    lake = Lake.init(obj.location)
    click.echo(f"initialized lake at {lake.uri}")


@cli.command()
@click.argument("pool", required=False)
@click.pass_obj
def verify(obj: Context, pool: str | None) -> None:
    """Check every invariant of the lake (or of POOL); exit non-zero naming each fault."""
    lake = obj.lake()
    faults = list(lake.verify(pool))
    for fault in faults:
        click.echo(f"fault: {fault}", err=True)
    if faults:
        raise LimnoError(f"{len(faults)} fault(s) in lake {lake.uri}")
    click.echo(f"ok: lake {lake.uri} verified")


def _register() -> None:
    from limno.cli import _data, _git, _maintenance, _pools

    for module in (_pools, _data, _git, _maintenance):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning limno errors into one ``error:`` line."""
    try:
        cli.main(args=argv, prog_name="limno", standalone_mode=False)
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
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)
