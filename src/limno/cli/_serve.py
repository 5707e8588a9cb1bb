"""``limno serve``: the lake over HTTP (see :mod:`limno.server`).

FastAPI and uvicorn are imported only when the server starts: no other command
pays for them.
"""

from __future__ import annotations

import click

from limno.cli._context import Context
from limno.errors import InvalidInputError

__all__ = ["COMMANDS"]


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9867,
    show_default=True,
    help="TCP port (0: any free one; the ready line says which).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0: every interface).",
)
@click.pass_obj
def serve(obj: Context, port: int, host: str) -> None:
    """Serve the lake's HTTP API until SIGTERM or Ctrl-C (OpenAPI at /openapi.json)."""
    if obj.location.split("://", 1)[0].lower() in ("http", "https"):
        raise InvalidInputError(
            f"limno serve serves a lake path or s3:// location, not another server ({obj.location})"
        )
    from limno.server.run import serve as run

    run(obj.location, host, port)


COMMANDS = [serve]
