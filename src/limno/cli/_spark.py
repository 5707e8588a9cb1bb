"""``limno spark start|status|stop``: the long-lived Spark session commands attach to.

``start`` runs a Spark Connect server (detached; :mod:`limno.engines.spark_server`)
and returns once it answers a query; while it is up, ``--engine spark`` (and
``--engine auto`` when it picks Spark) runs there instead of starting a JVM.
PySpark is imported only by ``start``, and only when it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from limno.cli._context import KEY_VALUE, Context, format_option
from limno.cli._output import write_dicts

__all__ = ["COMMANDS", "spark"]


@click.group()
def spark() -> None:
    """A long-lived Spark session (a Spark Connect server) for --engine spark."""


@spark.command()
@click.option(
    "--master",
    default=None,
    help="Spark master URL of the server (default: $LIMNO_SPARK_MASTER, else the config's,"
    " else local[*]).",
)
@click.option(
    "--conf",
    "conf",
    multiple=True,
    type=KEY_VALUE,
    help="KEY=VALUE Spark setting of the server (repeatable).",
)
@click.option(
    "--port",
    type=int,
    default=None,
    help="Port of the Spark Connect server (default: 15002; 0 picks a free one).",
)
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Seconds to wait for the server to answer (default: 180).",
)
@click.pass_obj
def start(
    obj: Context,
    master: str | None,
    conf: Sequence[tuple[str, str]],
    port: int | None,
    timeout: float | None,
) -> None:
    """Start the server, wait until it answers, print its URL."""
    from limno.engines import spark_server

    master, settings = obj.spark(master, conf)
    server = spark_server.start(
        master,
        settings,
        port,
        spark_server.START_TIMEOUT if timeout is None else timeout,
    )
    click.echo(server.url)
    click.echo(
        f"Spark Connect server up (pid {server.pid}, master {server.master}, log {server.log})",
        err=True,
    )


@spark.command()
@format_option
@click.pass_obj
def status(obj: Context, fmt: str | None) -> None:
    """Say whether the server is up: 'up URL (pid, master, log)' or 'down'.

    With a format (-f), one row: state, url, pid, master, log.
    """
    from limno.engines import spark_server

    server = spark_server.running()
    out = obj.listing_format(fmt)
    if out is not None:
        names = ("state", "url", "pid", "master", "log")
        row: dict[str, object] = {"state": "down"}
        if server is not None:
            row = {"state": "up", "url": server.url, "pid": server.pid}
            row |= {"master": server.master, "log": str(server.log)}
        write_dicts(names, [row], out)
        return
    if server is None:
        click.echo("down")
        return
    click.echo(f"up {server.url} (pid {server.pid}, master {server.master}, log {server.log})")


@spark.command()
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Seconds to wait after SIGTERM before SIGKILL (default: 30).",
)
def stop(timeout: float | None) -> None:
    """Stop the server (SIGTERM, then SIGKILL) and forget it."""
    from limno.engines import spark_server

    server = spark_server.stop(spark_server.STOP_TIMEOUT if timeout is None else timeout)
    if server is None:
        click.echo("no Spark Connect server was running", err=True)
        return
    click.echo(f"stopped the Spark Connect server (pid {server.pid})", err=True)


COMMANDS = [spark]
