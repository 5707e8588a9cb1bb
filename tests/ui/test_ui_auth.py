"""Signing in and out, sessions, CSRF, roles: in the browser and over plain HTTP."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Browser, Page, expect

from server_support import Served, served_user, start_server
from ui_support import csrf_of, session_client, shot, signed_in


def test_pages_redirect_to_sign_in_without_a_session(ui_server: Served) -> None:
    answer = httpx.get(f"{ui_server.url}/pools/logs", follow_redirects=False, timeout=60)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=%2Fpools%2Flogs"
    # the API keeps answering problem+json, not pages
    api = httpx.get(f"{ui_server.url}/v1/pools", timeout=60)
    assert api.status_code == 401
    assert api.headers["content-type"] == "application/problem+json"
    # UI pages are not in the API's document
    spec = httpx.get(f"{ui_server.url}/openapi.json", timeout=60).json()
    assert "/pools" not in spec["paths"] and "/login" not in spec["paths"]


def test_wrong_secret_is_refused_and_sign_out_ends_the_session(
    browser: Browser, ui_server: Served
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{ui_server.url}/pools")
        expect(page).to_have_url(re.compile(r"/login\?next="))
        page.get_by_label("Access key id").fill(ui_server.env["LIMNO_ACCESS_KEY_ID"])
        page.get_by_label("Secret access key").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("invalid access key id or secret")
        shot(page, "login")
        cookie = [c for c in context.cookies() if c["name"] == "limno_session"]
        assert cookie and cookie[0]["httpOnly"] and cookie[0]["sameSite"] == "Strict"
    finally:
        context.close()
    with signed_in(browser, ui_server.url, ui_server.env) as page:
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("status")).to_have_text("signed out")
        page.goto(f"{ui_server.url}/pools")
        expect(page).to_have_url(re.compile(r"/login\?next=%2Fpools$"))


def test_a_post_without_the_csrf_token_is_refused(ui_server: Served) -> None:
    with session_client(ui_server.url, ui_server.env) as (client, token):
        forged = client.post("/pools", data={"name": "forged", "kind": "records"})
        assert forged.status_code == 403
        assert "CSRF" in forged.text
        wrong = client.post("/pools", data={"name": "forged", "csrf": token[:-2] + "xx"})
        assert wrong.status_code == 403
        assert "forged" not in client.get("/pools").text
        made = client.post("/pools", data={"name": "real", "kind": "records", "csrf": token})
        assert made.status_code == 303, made.text
        dropped = client.post("/pools/real/drop", data={"confirm": "real", "csrf": token})
        assert dropped.status_code == 303, dropped.text


def test_an_analyst_sees_no_write_actions_and_is_refused_anyway(
    browser: Browser, ui_server: Served
) -> None:
    analyst = served_user(ui_server, "ann", "analyst")
    with signed_in(browser, ui_server.url, analyst) as page:
        expect(page.get_by_test_id("who")).to_contain_text("ann analyst")
        expect(page.get_by_role("link", name="logs", exact=True)).to_be_visible()
        expect(page.get_by_test_id("create-pool")).to_have_count(0)
        expect(page.get_by_text("Rename or drop")).to_have_count(0)
        expect(page.get_by_role("navigation", name="Main")).not_to_contain_text("Users")
        shot(page, "pools-analyst")
    with session_client(ui_server.url, analyst) as (client, token):
        refused = client.post("/pools", data={"name": "nope", "kind": "records", "csrf": token})
        assert refused.status_code == 403
        assert "may not write to the lake" in refused.text
        drop = client.post("/pools/logs/drop", data={"confirm": "logs", "csrf": token})
        assert drop.status_code == 403
        assert client.get("/users").status_code == 403


def test_keyboard_reaches_everything_with_a_visible_focus(page: Page) -> None:
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent")
    assert focused == "Skip to content"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # the brand, then the first nav link
    assert page.evaluate("document.activeElement.textContent") == "Pools"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"


def test_sign_in_goes_back_only_to_this_site(ui_server: Served) -> None:
    with httpx.Client(base_url=ui_server.url, follow_redirects=False, timeout=60) as client:
        token = csrf_of(client.get("/login").text)
        for target, landing in (("/pools/logs", "/pools/logs"), ("//evil.example", "/pools")):
            answer = client.post(
                "/login",
                data={
                    "csrf": token,
                    "access_key_id": ui_server.env["LIMNO_ACCESS_KEY_ID"],
                    "secret": ui_server.env["LIMNO_SECRET_ACCESS_KEY"],
                    "next": target,
                },
            )
            assert answer.headers["location"] == landing
            token = csrf_of(client.get("/pools").text)  # a new session: a new token
        page = client.get("/pools")
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_a_no_auth_server_needs_no_sign_in_but_still_checks_csrf(ui_lake: str) -> None:
    served = start_server(ui_lake, "--no-auth")
    try:
        with httpx.Client(base_url=served.url, follow_redirects=False, timeout=60) as client:
            page = client.get("/pools")
            assert page.status_code == 200 and "anonymous" in page.text
            assert client.post("/pools", data={"name": "x"}).status_code == 403
            token = csrf_of(page.text)
            made = client.post("/pools", data={"name": "noauth", "csrf": token})
            assert made.status_code == 303
            dropped = client.post("/pools/noauth/drop", data={"confirm": "noauth", "csrf": token})
            assert dropped.status_code == 303, dropped.text
    finally:
        assert served.stop() == 0
