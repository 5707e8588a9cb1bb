"""The decision table: every role × action × grant, by rule and by listed cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from limno.auth import ACTIONS, LEVELS, ROLES, User, allowed, check
from limno.auth.roles import level_for, parse_level, parse_role
from limno.errors import ForbiddenError, InvalidInputError

P, Q = "pool-p", "pool-q"

#: (role, grant on P or None, action) -> allowed on P; written out, not computed
TABLE = {
    ("admin", None, "read"): True,
    ("admin", None, "write"): True,
    ("admin", None, "admin"): True,
    ("developer", None, "read"): True,
    ("developer", None, "write"): True,
    ("developer", None, "admin"): False,
    ("developer", "write", "write"): True,
    ("developer", "read", "read"): True,
    ("developer", "read", "write"): False,  # narrowed
    ("developer", "none", "read"): False,  # narrowed to nothing
    ("developer", "none", "write"): False,
    ("developer", "write", "admin"): False,  # a grant never gives admin
    ("analyst", None, "read"): True,
    ("analyst", None, "write"): False,
    ("analyst", None, "admin"): False,
    ("analyst", "write", "write"): True,  # widened
    ("analyst", "write", "read"): True,
    ("analyst", "read", "write"): False,
    ("analyst", "none", "read"): False,
    ("analyst", "write", "admin"): False,
}


@pytest.mark.parametrize(("role", "grant", "action"), list(TABLE))
def test_the_listed_decisions(role: str, grant: str | None, action: str) -> None:
    user = User("u", role, grants={} if grant is None else {P: grant})
    assert allowed(user, action, P) is TABLE[role, grant, action]


def _expected(role: str, grant: str | None, action: str) -> bool:
    """The rule, stated independently of the implementation's ranks."""
    if role == "admin":
        return True
    if action == "admin":
        return False
    level = grant if grant is not None else {"developer": "write", "analyst": "read"}[role]
    return action in {"none": set(), "read": {"read"}, "write": {"read", "write"}}[level]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("grant", [None, *LEVELS])
@pytest.mark.parametrize("action", ACTIONS)
def test_every_role_action_and_grant(role: str, grant: str | None, action: str) -> None:
    user = User("u", role, grants={} if grant is None else {P: grant})
    assert allowed(user, action, P) is _expected(role, grant, action)
    # a grant on P says nothing about Q, nor about the lake as a whole
    assert allowed(user, action, Q) is _expected(role, None, action)
    assert allowed(user, action, None) is _expected(role, None, action)


@given(
    role=st.sampled_from(ROLES),
    grants=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(LEVELS)),
    action=st.sampled_from(ACTIONS),
    pool=st.sampled_from(["a", "b", "c", "d"]),
)
def test_grants_decide_only_their_own_pool(
    role: str, grants: dict[str, str], action: str, pool: str
) -> None:
    user = User("u", role, grants=grants)
    assert allowed(user, action, pool) is _expected(role, grants.get(pool), action)
    # write implies read: no user may write what it may not read
    if allowed(user, "write", pool):
        assert allowed(user, "read", pool)


def test_check_raises_forbidden_naming_user_and_target() -> None:
    analyst = User("ann", "analyst", grants={P: "none"})
    check(analyst, "read", Q)
    with pytest.raises(ForbiddenError, match=r"'ann' \(analyst\) may not write to pool logs"):
        check(analyst, "write", Q, what="pool logs")
    with pytest.raises(ForbiddenError, match="may not read pool pool-p"):
        check(analyst, "read", P)
    with pytest.raises(ForbiddenError, match="may not administer the lake"):
        check(User("dev", "developer"), "admin")
    assert ForbiddenError.status == 403


def test_unknown_roles_levels_and_actions() -> None:
    assert parse_role(" Developer ") == "developer"
    assert parse_level("WRITE") == "write"
    with pytest.raises(InvalidInputError, match="unknown role 'owner'"):
        parse_role("owner")
    with pytest.raises(InvalidInputError, match="unknown grant level 'all'"):
        parse_level("all")
    with pytest.raises(InvalidInputError, match="unknown action 'delete'"):
        allowed(User("u", "admin"), "delete", P)
    # a role stored by a later version grants nothing here rather than everything
    stranger = User("u", "auditor", grants={P: "write"})
    assert level_for(stranger, P) == "none"
    assert not any(allowed(stranger, a, p) for a in ACTIONS for p in (P, None))
