"""Signing in and out, and the front page."""

from __future__ import annotations

import contextlib

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from limno.errors import NotFoundError, UnauthenticatedError
from limno.ui.pages import Visitor, page_router, read_form, redirect, render, signer_of
from limno.ui.session import Session, set_cookie

router = page_router()


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/pools", status_code=303)


def _local(target: str | None) -> str:
    """Where to go after signing in: a path of this site only (never ``//host`` nor
    ``/\\host``, which browsers read as another site)."""
    if not target or not target.startswith("/") or target[1:2] in ("/", "\\"):
        return "/pools"
    return target


@router.get("/login")
def login_page(request: Request, viewer: Visitor, next: str = "/pools") -> Response:
    if viewer.signed_in:
        return RedirectResponse(_local(next), status_code=303)
    return render(request, "login.html", title="Sign in", next=_local(next), error="")


@router.post("/login")
async def login(request: Request, viewer: Visitor) -> Response:
    form = await read_form(request, viewer)
    target = _local(form.get("next"))
    authenticator = request.app.state.authenticator
    if authenticator is None:  # --no-auth: everyone is signed in already
        return RedirectResponse(target, status_code=303)
    key_id = form.get("access_key_id", "").strip()
    try:
        _, generation = await run_in_threadpool(
            authenticator.sign_in, key_id, form.get("secret", "")
        )
    except UnauthenticatedError as e:
        return render(request, "login.html", status=401, title="Sign in", next=target, error=str(e))
    response = RedirectResponse(target, status_code=303)
    set_cookie(request, response, signer_of(request), Session.fresh(key_id, generation))
    return response


@router.post("/logout")
async def logout(request: Request, viewer: Visitor) -> Response:
    await read_form(request, viewer)
    authenticator = request.app.state.authenticator
    key_id = viewer.session.key_id
    if authenticator is not None and key_id and viewer.user is not None:
        # server-side: a copy of this cookie must not outlive the sign-out
        with contextlib.suppress(NotFoundError):  # the key went meanwhile: ended anyway
            await run_in_threadpool(authenticator.end_sessions, key_id)
    response = redirect("/login", "signed out")
    set_cookie(request, response, signer_of(request), Session.fresh())
    return response
