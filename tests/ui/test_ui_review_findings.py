"""Findings of the UI review (2026-11-26), each a test that failed before its fix.

- A server with auth whose secret was passed in (``create_app`` with an
  :class:`~limno.auth.verify.Authenticator` over an ``AuthStore(server_secret=...)``)
  but no ``LIMNO_AUTH_SECRET`` in its environment signed session cookies with the
  ``--no-auth`` key, derived from the lake's location alone: anyone could forge a
  session of any access key id.
- A 403 page named a pool by its name to a viewer who may not read it and asked by
  id (the /v1 rule: the name only to a caller who may read the pool).
- A data page's from-bound holding a malformed decimal was a 500, not a 400 page.
- ``/events`` with a cookie header Python's SimpleCookie refuses was a 500.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from limno import Lake
from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from limno.auth.store import AuthStore
from limno.auth.verify import Authenticator
from limno.server.app import create_app
from limno.ui.session import COOKIE, Session, Signer
from server_support import AUTH_SECRET, Served, served_user
from ui_support import session_client


def test_sessions_of_an_auth_server_without_the_env_secret_cannot_be_forged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LIMNO_AUTH_SECRET", raising=False)
    path = str(tmp_path / "lake")
    Lake.init(path)
    lake = LocalLake.open(path)
    store = AuthStore(lake.storage, server_secret=AUTH_SECRET)
    _, key = store.create_user("root", "admin")
    assert key is not None
    app = create_app(path, lake=lake, authenticator=Authenticator(store))
    signer: Signer = app.state.ui_signer
    # the key anyone can compute from the lake's location (the --no-auth one)
    forged = Signer.for_server(lake.uri, auth=False).dumps(Session.fresh(key.access_key_id))
    assert signer.loads(forged) is None
    # the server's own cookies still check out
    mine = Session.fresh(key.access_key_id)
    assert signer.loads(signer.dumps(mine)) == mine


def test_a_refusal_names_a_pool_only_to_who_may_read_it(ui_server: Served) -> None:
    lake = Lake.open(ui_server.lake)
    hidden = lake.create_pool("hidden_review", key="ts")
    hidden.load([pa.table({"ts": [1]})])
    env = served_user(ui_server, "nosy", "analyst")
    assert ui_server.secret is not None
    admin = LocalAuth(LocalLake.open(ui_server.lake), server_secret=ui_server.secret)
    admin.grant("nosy", "hidden_review", "none")
    with session_client(ui_server.url, env) as (client, _):
        for path in (
            f"/pools/{hidden.id}",
            f"/pools/{hidden.id}/data",
            f"/pools/{hidden.id}/merge-requests",
            f"/operations?pool={hidden.id}",
        ):
            answer = client.get(path)
            assert answer.status_code == 403, path
            assert "hidden_review" not in answer.text, path
            assert hidden.id in answer.text, path


def test_a_malformed_decimal_bound_is_a_400_page(ui_server: Served) -> None:
    with session_client(ui_server.url, ui_server.env) as (client, _):
        answer = client.get("/pools/logs/data", params={"start": '[{"decimal": "x"}]'})
        assert answer.status_code == 400
        assert "not a list of key values" in answer.text


def test_events_read_the_session_from_any_cookie_header(ui_server: Served) -> None:
    """A cookie of another app on this host that Python's SimpleCookie refuses (``$$``)
    made ``/events`` a 500 for a signed-in browser; the server's own cookie parser
    reads the session as the pages do."""
    with session_client(ui_server.url, ui_server.env) as (client, _):
        cookie = f"{COOKIE}={client.cookies[COOKIE]}; $$=1"
        with (
            httpx.Client(base_url=ui_server.url, timeout=60) as bare,
            bare.stream("GET", "/events", headers={"Cookie": cookie}) as answer,
        ):
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")


def test_a_compare_page_lists_a_bounded_number_of_conflicts(ui_server: Served) -> None:
    """Every conflict was a line of the page (and each listed entry looked itself up in
    all of them): a branch at odds with main over many paths made a page of any size."""
    from limno.ui.routes_merge_requests import SHOWN_ENTRIES

    lake = Lake.open(ui_server.lake)
    many = lake.create_pool("many_conflicts", kind="files")
    many.put("main", "seed", b"0")
    many.commit("main", "seed")
    many.branch("dev")
    paths = [f"p{i:04d}" for i in range(SHOWN_ENTRIES + 5)]
    for branch in ("main", "dev"):
        for path in paths:
            many.put(branch, path, branch.encode())
        many.commit(branch, f"{branch}'s side")
    with session_client(ui_server.url, ui_server.env) as (client, _):
        answer = client.get(
            "/pools/many_conflicts/merge-requests/new", params={"source": "dev", "dest": "main"}
        )
    assert answer.status_code == 200
    assert f"{len(paths)} conflicts" in answer.text
    assert answer.text.count("<li>p0") == SHOWN_ENTRIES
    assert "5 more" in answer.text


def test_merging_a_request_whose_branch_is_gone_comes_back_to_its_page(
    ui_server: Served,
) -> None:
    """The failed attempt is kept on the request: the merge answers with its page and
    the error as the notice, not a 404 page as if the request were missing."""
    lake = Lake.open(ui_server.lake)
    pool = lake.create_pool("gone_branch", key="ts")
    pool.load([pa.table({"ts": [1]})])
    pool.branch("dev")
    pool.load([pa.table({"ts": [2]})], branch="dev")
    mr = pool.open_merge_request("dev", title="two")
    pool.delete_branch("dev")
    here = f"/pools/gone_branch/merge-requests/{mr.id}"
    with session_client(ui_server.url, ui_server.env) as (client, token):
        shown = client.get(here)
        assert shown.status_code == 200 and "dev" in shown.text
        answer = client.post(f"{here}/merge", data={"csrf": token, "strategy": "fail"})
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"].startswith(here + "?notice=not+merged")
        # a request id that is not one comes back to its (404) page, a path of this pool
        odd = client.post(f"{here}x%3Fy/merge", data={"csrf": token})
        assert odd.headers["location"].startswith(f"{here}x%3Fy?notice=not+merged")
    kept = pool.merge_request(mr.id)
    assert kept.state == "open"
    assert [a.outcome for a in kept.attempts] == ["failed"]
