"""``limno serve``: the lake over HTTP (see :mod:`limno.server`).

FastAPI and uvicorn are imported only when the server starts: no other command
pays for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from limno.cli._context import SIZE, Context
from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from limno.gateway.handlers_common import GatewayOptions

__all__ = ["COMMANDS"]


#: the most server processes ``limno serve`` starts unless told (each holds its own
#: interpreter, a few hundred MB at most)
MAX_DEFAULT_WORKERS = 4


def default_workers() -> int:
    """One server process per core this process may use, at most
    :data:`MAX_DEFAULT_WORKERS`: a server of one process runs its Python under one
    lock and leaves the other cores idle under many clients (commits from 8 clients:
    0.37x of in-process with one, 0.78x with two on two cores)."""
    import os

    return max(1, min(MAX_DEFAULT_WORKERS, len(os.sched_getaffinity(0))))


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
@click.option(
    "--no-auth",
    is_flag=True,
    help="Ask no credentials, allow everything: trusted loopback or tests only."
    " Without it the server needs LIMNO_AUTH_SECRET and checks every request.",
)
@click.option(
    "--query-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest a query may run (a caller may ask for less).",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=10_000_000,
    show_default=True,
    metavar="N",
    help="Most rows a query may answer (a caller may ask for fewer).",
)
@click.option(
    "--max-result-bytes",
    type=SIZE,
    default="1GiB",
    show_default=True,
    metavar="SIZE",
    help="Largest answer a query may give, in memory (a caller may ask for less).",
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    metavar="MB",
    help="Largest JSON request body (413 beyond).",
)
@click.option(
    "--max-upload-mb",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="MB",
    help="Largest upload of load/add, spooled to disk (0: no limit).",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="A client sending no body bytes this long gets 408; nothing is done.",
)
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Serve HTTPS: certificate.")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="Serve HTTPS: private key.")
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Allow browsers of ORIGIN (repeatable; none: CORS off).",
)
@click.option(
    "--events-heartbeat",
    type=click.FloatRange(min=0.05),
    default=15.0,
    show_default=True,
    metavar="SECONDS",
    help="Keep-alive comment interval of idle event streams.",
)
@click.option(
    "--max-event-streams",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    metavar="N",
    help="Event streams (GET /v1/events) open at once per server process;"
    " one more gets 503 with Retry-After.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Server processes sharing the port  [default: one per core, at most 4].",
)
@click.option(
    "--s3-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="PORT",
    help="Also serve the S3 gateway (file pools as buckets) on this port (0: any free one;"
    " a second ready line says which).",
)
@click.option(
    "--s3-host", default=None, metavar="HOST", help="The gateway's address [default: --host]."
)
@click.option(
    "--s3-domain",
    default=None,
    metavar="DOMAIN",
    help="Virtual-host addressing: BUCKET.DOMAIN is bucket BUCKET (path-style always works).",
)
@click.option(
    "--s3-root-branch",
    default=None,
    metavar="BRANCH",
    help="Keys are paths on BRANCH of every pool (s3://pool/path), and CreateBucket /"
    " DeleteBucket create and drop file pools. Default: keys are REF/PATH.",
)
@click.option(
    "--s3-autocommit",
    is_flag=True,
    help="Commit each completed S3 write at once (one commit per write); default: writes"
    " stay staged until 'limno commit'.",
)
@click.pass_obj
def serve(
    obj: Context,
    port: int,
    host: str,
    no_auth: bool,
    query_timeout: float,
    max_rows: int,
    max_result_bytes: int,
    max_body_mb: float,
    max_upload_mb: float,
    body_timeout: float,
    tls_cert: str | None,
    tls_key: str | None,
    cors_origins: tuple[str, ...],
    events_heartbeat: float,
    max_event_streams: int,
    workers: int | None,
    s3_port: int | None,
    s3_host: str | None,
    s3_domain: str | None,
    s3_root_branch: str | None,
    s3_autocommit: bool,
) -> None:
    """Serve the lake's HTTP API until SIGTERM or Ctrl-C (OpenAPI at /openapi.json).

    Every request but /health and the API's documents needs an access key (HTTP
    Basic; see 'limno auth'), and LIMNO_AUTH_SECRET must be set, unless --no-auth.

    With --s3-port, the S3 gateway too: buckets are file pools, keys REF/PATH (or paths
    on --s3-root-branch), requests signed (SigV4 or SigV2) with the same access keys.
    """
    if obj.location.split("://", 1)[0].lower() in ("http", "https"):
        raise InvalidInputError(
            f"limno serve serves a lake path or s3:// location, not another server ({obj.location})"
        )
    from limno.engines.query_limits import QueryLimits
    from limno.server.guard import MB, Limits, Options
    from limno.server.run import serve as run

    limits = QueryLimits(query_timeout, max_rows, max_result_bytes)
    options = Options(
        Limits(int(max_body_mb * MB), int(max_upload_mb * MB) or None, body_timeout),
        cors_origins,
        tls_cert,
        tls_key,
        events_heartbeat,
        max_event_streams,
    )
    if workers is None:
        workers = default_workers()
    gateway = _gateway_options(
        host, port, s3_port, s3_host, s3_domain, s3_root_branch, s3_autocommit, body_timeout
    )
    run(
        obj.location,
        host,
        port,
        auth=not no_auth,
        limits=limits,
        options=options,
        workers=workers,
        gateway=gateway,
    )
    # stopped: the process ends now, and the collector's passes over what the server
    # made would only delay its exit (by a few tenths of a second)
    import gc

    gc.freeze()


def _gateway_options(
    host: str,
    port: int,
    s3_port: int | None,
    s3_host: str | None,
    domain: str | None,
    root_branch: str | None,
    autocommit: bool,
    body_timeout: float,
) -> GatewayOptions | None:
    """The S3 gateway's settings (None: no --s3-port); InvalidInputError for options
    that make no sense together."""
    if s3_port is None:
        given = [
            name
            for name, value in (
                ("--s3-host", s3_host),
                ("--s3-domain", domain),
                ("--s3-root-branch", root_branch),
                ("--s3-autocommit", autocommit or None),
            )
            if value is not None
        ]
        if given:
            raise InvalidInputError(f"{', '.join(given)} needs --s3-port (the gateway's port)")
        return None
    if s3_port and s3_port == port:
        raise InvalidInputError(f"--s3-port {s3_port} is the API's port: give the gateway its own")
    from limno.gateway.handlers_common import GatewayOptions

    return GatewayOptions(
        host=s3_host or host,
        port=s3_port,
        domain=domain.strip(".").lower() if domain else None,
        root_branch=root_branch or None,
        autocommit=autocommit,
        body_timeout=body_timeout,
    )


COMMANDS = [serve]
