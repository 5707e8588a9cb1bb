"""Sessions end on the server: a copy of a session cookie is refused once its owner
signs out, or once the admin deletes the key it was signed in with."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Browser, expect

from server_support import Served, served_user
from ui_support import TIMEOUT_MS, session_client, signed_in


def _copy_works(url: str, cookie: str) -> bool:
    """Whether a client holding only ``cookie`` (no sign-in of its own) sees a page."""
    with httpx.Client(base_url=url, cookies={"limno_session": cookie}, timeout=60) as copy:
        return copy.get("/pools", follow_redirects=False).status_code == 200


def test_a_cookie_copied_before_sign_out_is_refused_after_it(
    browser: Browser, ui_server: Served
) -> None:
    env = served_user(ui_server, "carol", "developer")
    copy = browser.new_context()
    copy.set_default_timeout(TIMEOUT_MS)
    try:
        with signed_in(browser, ui_server.url, env) as page:
            copy.add_cookies(
                [
                    {"name": c["name"], "value": c["value"], "url": ui_server.url}
                    for c in page.context.cookies()
                ]
            )
            stolen = copy.new_page()
            stolen.goto(f"{ui_server.url}/pools")
            expect(stolen.get_by_test_id("who")).to_contain_text("carol")
            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_role("status")).to_have_text("signed out")
            stolen.goto(f"{ui_server.url}/pools")
            expect(stolen).to_have_url(re.compile(r"/login\?next=%2Fpools$"))
            # nor does the copy open the event stream any more
            cookie = next(c["value"] for c in copy.cookies() if c["name"] == "limno_session")
            events = httpx.get(
                f"{ui_server.url}/events", cookies={"limno_session": cookie}, timeout=60
            )
            assert events.status_code == 401
    finally:
        copy.close()
    # signing in again starts a session that works
    with signed_in(browser, ui_server.url, env) as again:
        expect(again.get_by_test_id("who")).to_contain_text("carol")


def test_a_deleted_keys_copied_session_stops_working(ui_server: Served) -> None:
    env = served_user(ui_server, "dan", "analyst")
    with session_client(ui_server.url, env) as (client, _):
        cookie = client.cookies["limno_session"]
        assert _copy_works(ui_server.url, cookie)
        with session_client(ui_server.url, ui_server.env) as (admin, token):
            key = env["LIMNO_ACCESS_KEY_ID"]
            deleted = admin.post(f"/keys/{key}/delete", data={"csrf": token, "confirm": key})
            assert deleted.status_code == 303, deleted.text
        assert not _copy_works(ui_server.url, cookie)
        assert client.get("/pools").status_code == 303
