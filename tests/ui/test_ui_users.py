"""The users page in a real browser: an admin creates a user (its key's secret shown
once), another key, a grant; an analyst sees no Users entry and gets a 403 page; a
deleted key (after a confirmation) signs its sessions out; forms need their CSRF token."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from server_support import Served, served_user
from ui_support import session_client, shot, signed_in


def test_an_admin_creates_a_user_a_key_and_a_grant(
    page: Page, browser: Browser, ui_server: Served
) -> None:
    page.get_by_role("link", name="Users").click()
    form = page.get_by_test_id("create-user")
    form.get_by_label("Name").fill("dora")
    form.get_by_label("Role").select_option("analyst")
    form.get_by_role("button", name="Create user").click()
    key_id = page.get_by_test_id("new-key-id").inner_text()
    secret = page.get_by_test_id("new-key-secret").inner_text()
    users = page.get_by_test_id("users")
    dora = users.get_by_role("row").filter(has=page.get_by_role("rowheader", name="dora"))
    expect(dora).to_contain_text(key_id)
    expect(dora).not_to_contain_text(secret)  # the secret: on the notice only, this once
    dora.get_by_role("button", name="New key for dora").click()
    second = page.get_by_test_id("new-key-id").inner_text()
    assert second != key_id
    expect(dora).to_contain_text(second)
    dora.get_by_label("Pool").select_option("logs")
    dora.get_by_label("Level").select_option("write")
    dora.get_by_role("button", name="Set grant of dora").click()
    expect(page.get_by_role("status")).to_have_text("granted dora write on logs")
    expect(dora).to_contain_text("logs: write")
    assert secret not in page.content()
    shot(page, "users")

    env = {"LIMNO_ACCESS_KEY_ID": key_id, "LIMNO_SECRET_ACCESS_KEY": secret}
    with signed_in(browser, ui_server.url, env) as theirs:
        expect(theirs.get_by_test_id("who")).to_contain_text("dora analyst")
        # the grant lets this analyst write to logs (and only logs)
        theirs.goto(f"{ui_server.url}/pools/logs")
        expect(theirs.get_by_test_id("create-branch")).to_be_visible()
        theirs.goto(f"{ui_server.url}/pools/docs")
        expect(theirs.get_by_test_id("create-branch")).to_have_count(0)
        # the key deleted by the admin (after a confirmation): signed out on the next page
        page.get_by_role("button", name=f"Delete key {key_id}").click()
        page.get_by_role("dialog").get_by_role("button", name="Yes, do it").click()
        expect(page.get_by_role("status")).to_have_text(f"deleted key {key_id}")
        expect(users).not_to_contain_text(key_id)
        theirs.goto(f"{ui_server.url}/pools")
        expect(theirs).to_have_url(re.compile(r"/login\?next="))
    # revoking the grant
    dora.get_by_label("Pool").select_option("logs")
    dora.get_by_label("Level").select_option("revoke")
    dora.get_by_role("button", name="Set grant of dora").click()
    expect(page.get_by_role("status")).to_have_text("revoked dora's grant on logs")
    expect(dora).not_to_contain_text("logs: write")


def test_an_analyst_has_no_users_page(browser: Browser, ui_server: Served) -> None:
    env = served_user(ui_server, "ana", "analyst")
    with signed_in(browser, ui_server.url, env) as page:
        nav = page.get_by_role("navigation", name="Main")
        expect(nav.get_by_role("link", name="Operations")).to_be_visible()
        expect(nav.get_by_role("link", name="Users")).to_have_count(0)
        answer = page.goto(f"{ui_server.url}/users")
        assert answer is not None and answer.status == 403
        expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
        expect(page.get_by_test_id("create-user")).to_have_count(0)
        shot(page, "users-analyst-403")
    # the server refuses their POSTs too, token or not
    with session_client(ui_server.url, env) as (client, token):
        refused = client.post("/users", data={"csrf": token, "name": "eve", "role": "admin"})
        assert refused.status_code == 403 and "eve" not in refused.text


def test_user_forms_need_their_csrf_token(ui_server: Served) -> None:
    with session_client(ui_server.url, ui_server.env) as (client, token):
        forged = client.post("/users", data={"name": "mallory", "role": "admin"})
        assert forged.status_code == 403
        listed = client.get("/users")
        assert listed.status_code == 200 and "mallory" not in listed.text
        made = client.post("/users", data={"csrf": token, "name": "trent", "role": "developer"})
        assert made.status_code == 200 and 'data-testid="new-key-secret"' in made.text
