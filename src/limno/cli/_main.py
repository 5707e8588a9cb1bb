"""The command group, global options and error handling shared by every command.

Every command resolves the lake the same way (``--lake``, ``LIMNO_LAKE``, the
default path) and every LimnoError becomes one ``error: ...`` line on stderr and
exit code 1; usage errors exit 2 (click's convention).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from limno.config import lake_location
from limno.errors import LimnoError
from limno.lake import Lake

__all__ = ["Context", "cli", "main"]


@dataclass
class Context:
    """What every command gets: the lake location (opened on demand)."""

    location: str

    def lake(self) -> Lake:
        return Lake.open(self.location)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--lake",
    "lake",
    metavar="LOCATION",
    default=None,
    help="Lake location (path, file://, s3://bucket/prefix). "
    "Default: $LIMNO_LAKE, else ~/.local/share/limno.",
)
@click.version_option(package_name="limno")
@click.pass_context
def cli(ctx: click.Context, lake: str | None) -> None:
    """limno: a versioned, git-like data lake for Python and Spark."""
    ctx.obj = Context(lake_location(lake))


@cli.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create a lake at the lake location."""
    lake = Lake.init(obj.location)
    click.echo(f"initialized lake at {lake.uri}")


@cli.command()
@click.pass_obj
def verify(obj: Context) -> None:
    """Check every invariant of the lake; exit non-zero naming each fault."""
    lake = obj.lake()
    faults = list(lake.verify())
    for fault in faults:
        click.echo(f"fault: {fault}", err=True)
    if faults:
        raise LimnoError(f"{len(faults)} fault(s) in lake {lake.uri}")
    click.echo(f"ok: lake {lake.uri} verified")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning limno errors into one ``error:`` line."""
    try:
        cli.main(args=argv, prog_name="limno", standalone_mode=False)
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
