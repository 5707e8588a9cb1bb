"""What every page of the web UI shares: the viewer, rendering, forms, errors.

A page route is a plain ``def`` on a :func:`page_router` (FastAPI runs it in its thread
pool, so the lake's blocking calls never hold the event loop) that takes the viewer
(:data:`Signed`: signed in, or a redirect to ``/login``) and returns
:func:`render`'s response. A POST route takes :data:`Posted` as well: the form,
read only after its CSRF token was checked (403 otherwise, nothing done).

Authorization is the server's: :meth:`Viewer.can` and :meth:`Viewer.need` ask
:func:`limno.auth.roles.allowed` / :func:`~limno.auth.roles.check`, as the /v1
routes' guard does, with the same actions (read, write, admin) on the same pool
ids. Templates hide what :meth:`Viewer.can` denies; routes call :meth:`Viewer.need`
before doing it anyway. Errors (any :class:`~limno.errors.LimnoError`) become a page
with the error's status and message; a missing or stale session becomes a
redirect to the sign-in page.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from limno.auth.roles import allowed, check
from limno.errors import LimnoError, UnauthenticatedError, http_status
from limno.ui.session import COOKIE, CSRF_FIELD, CSRF_HEADER, Session, Signer, set_cookie

if TYPE_CHECKING:
    import jinja2

    from limno.api.local import LocalLake
    from limno.auth.model import User
    from limno.auth.verify import Authenticator

__all__ = [
    "Posted",
    "Signed",
    "Viewer",
    "Visitor",
    "lake_of",
    "redirect",
    "render",
    "render_pool",
    "page_router",
    "plain",
]

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Viewer:
    """Who looks at a page: the signed-in user (None: a server without auth, where
    everyone acts as an admin, or nobody signed in yet), the session, its CSRF token."""

    user: User | None
    session: Session
    csrf: str
    #: the server checks credentials (False: ``--no-auth``)
    auth: bool
    #: the session cookie must be (re)sent with the answer
    fresh: bool = False

    @property
    def signed_in(self) -> bool:
        return self.user is not None or not self.auth

    @property
    def name(self) -> str:
        return self.user.name if self.user is not None else "anonymous"

    @property
    def author(self) -> str | None:
        """The author of what the viewer changes: the signed-in user's name (None on a
        server without auth: the lake's default author)."""
        return self.user.name if self.user is not None else None

    @property
    def role(self) -> str:
        return self.user.role if self.user is not None else "admin"

    def can(self, action: str, pool_id: str | None = None) -> bool:
        """Whether the viewer may do ``action`` (read, write, admin) on ``pool_id``."""
        if self.user is None:
            return not self.auth
        return allowed(self.user, action, pool_id)

    def need(self, action: str, pool_id: str | None = None, what: str | None = None) -> None:
        """ForbiddenError (a 403 page) unless :meth:`can`."""
        if self.user is None and not self.auth:
            return
        if self.user is None:
            raise UnauthenticatedError("sign in first")
        check(self.user, action, pool_id, what)

    def need_pool(self, action: str, pool_id: str, name: str, asked: str) -> None:
        """:meth:`need` on a pool, whose refusal names it by ``name`` only to a viewer
        who may read it (who can list that name anyway); to others as the request
        named it (``asked``: a name or an id), as the /v1 routes do."""
        shown = name if self.can("read", pool_id) else asked
        self.need(action, pool_id, f"pool {shown}")


class SignInRequired(Exception):
    """No signed-in user on a page that needs one: redirect to the sign-in page."""


def lake_of(request: Request) -> LocalLake:
    """The lake the server serves (the same object the /v1 routes use)."""
    lake: LocalLake = request.app.state.lake
    return lake


def signer_of(request: Request) -> Signer:
    signer: Signer = request.app.state.ui_signer
    return signer


async def visitor(request: Request) -> Viewer:
    """The viewer of any page (signed in or not); also sets ``request.state.user`` as
    the /v1 guard does, so the server's helpers (a query's readable pools, a commit's
    author) see the same caller."""
    signer = signer_of(request)
    authenticator: Authenticator | None = request.app.state.authenticator
    session = signer.loads(request.cookies.get(COOKIE))
    fresh = session is None
    if session is None:
        session = Session.fresh()
    user = None
    if authenticator is not None and session.key_id:
        try:
            user = await run_in_threadpool(
                authenticator.session_user, session.key_id, session.generation
            )
        except UnauthenticatedError:  # the key (or its user) is gone, or signed out
            session, fresh = Session.fresh(), True
    viewer = Viewer(user, session, signer.csrf(session), authenticator is not None, fresh)
    request.state.ui_viewer = viewer
    request.state.user = user
    return viewer


async def signed_in(viewer: Annotated[Viewer, Depends(visitor)]) -> Viewer:
    if not viewer.signed_in:
        raise SignInRequired
    return viewer


async def posted(request: Request, viewer: Annotated[Viewer, Depends(signed_in)]) -> dict[str, str]:
    return await read_form(request, viewer)


async def read_form(request: Request, viewer: Viewer) -> dict[str, str]:
    """The fields of a POSTed urlencoded form (the last value of each name), once its
    CSRF token (field ``csrf``, or header ``X-CSRF-Token``) checked out."""
    body = (await request.body()).decode("utf-8", "replace")
    fields = dict(parse_qsl(body, keep_blank_values=True))
    token = fields.pop(CSRF_FIELD, None) or request.headers.get(CSRF_HEADER)
    signer_of(request).check_csrf(viewer.session, token)
    return fields


async def csrf_checked(request: Request, viewer: Annotated[Viewer, Depends(signed_in)]) -> Viewer:
    """The viewer of a POST whose body is not a form (an upload): the token comes in
    the ``X-CSRF-Token`` header."""
    signer_of(request).check_csrf(viewer.session, request.headers.get(CSRF_HEADER))
    return viewer


#: the viewer of a page anyone may see (the sign-in page)
Visitor = Annotated[Viewer, Depends(visitor)]
#: the viewer of a page that needs a signed-in user
Signed = Annotated[Viewer, Depends(signed_in)]
#: a POSTed form, CSRF-checked
Posted = Annotated[dict[str, str], Depends(posted)]
#: the viewer of a POST with a raw body, CSRF-checked (header)
Uploading = Annotated[Viewer, Depends(csrf_checked)]


# -- rendering --------------------------------------------------------------------------
def _size(n: Any) -> str:
    if n is None or n == "":
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def _when(text: Any) -> str:
    """An ISO time as ``2026-11-26 02:15:07`` (UTC)."""
    if not text:
        return "—"
    try:
        moment = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return str(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def plain(value: Any) -> Any:
    """A value as JSON holds it: times as ISO text, anything else not JSON's as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _number(n: Any) -> str:
    return "—" if n is None or n == "" else f"{int(n):,}"


@functools.cache
def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        # compiled templates kept on disk (the user's temporary folder, checked
        # against each template's source): a new server's first page skips compiling
        # its templates, a third of a cold commit page
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(size=_size, when=_when, number=_number, short=lambda s: str(s)[:12])
    env.filters["urlpart"] = lambda s: quote(str(s), safe="")
    env.globals["urlencode"] = urlencode
    return env


def render(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """The page ``template`` (in ``limno/ui/templates``, extending ``base.html``) with
    ``context``; ``viewer``, ``request``, ``csrf`` and ``notice`` (a ``?notice=`` text
    from a redirect after a POST) are always there."""
    viewer: Viewer | None = getattr(request.state, "ui_viewer", None)
    text = (
        environment()
        .get_template(template)
        .render(
            request=request,
            viewer=viewer,
            csrf=viewer.csrf if viewer is not None else "",
            notice=request.query_params.get("notice", ""),
            **context,
        )
    )
    response = HTMLResponse(text, status_code=status)
    response.headers.update(_HEADERS)
    if viewer is not None and viewer.fresh:
        set_cookie(request, response, signer_of(request), viewer.session)
    return response


def render_pool(
    request: Request, template: str, pool: Any, tab: str, title: str, **context: Any
) -> HTMLResponse:
    """:func:`render` of a page of one pool (under its tabs, ``pool_tabs.html``)."""
    return render(request, template, title=title, section="pools", pool=pool, tab=tab, **context)


#: every page: not cached, not framed by another site, scripts and styles from this
#: server only (a value a page shows can never run as a script)
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; img-src 'self' data:;"
    " style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'",
}


def redirect(path: str, notice: str = "", **params: str) -> RedirectResponse:
    """303 to ``path`` (after a POST), with a one-line ``notice`` for the next page."""
    query = {**params, **({"notice": notice} if notice else {})}
    return RedirectResponse(path + ("?" + urlencode(query) if query else ""), status_code=303)


# -- routes ----------------------------------------------------------------------------
class _PageRoute(APIRoute):
    """A page: errors become an error page; no session, a redirect to sign in."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handler(request)
            except (SignInRequired, UnauthenticatedError):
                return _to_login(request)
            except LimnoError as e:
                return render(request, "error.html", status=http_status(e), error=e, title="Error")
            except RequestValidationError as e:
                wrong = "; ".join(_where(err) for err in e.errors())
                return render(
                    request,
                    "error.html",
                    status=400,
                    error=f"invalid request: {wrong}",
                    title="Error",
                )

        return page


def _where(err: Mapping[str, Any]) -> str:
    where = ".".join(str(x) for x in err.get("loc", ()) if x not in ("query", "path", "body"))
    return f"{where}: {err.get('msg', 'invalid')}"


def _to_login(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":
        target = "/"
    return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)


def page_router() -> APIRouter:
    """A router of pages: left out of the OpenAPI document, errors as pages."""
    return APIRouter(route_class=_PageRoute, include_in_schema=False)
