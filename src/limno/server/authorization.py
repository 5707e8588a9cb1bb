"""Who may call which route: the one table of the server's authorization.

Every operation of the API declares here what it needs (:data:`RULES`): an action
(``read``, ``write`` or ``admin``, :mod:`limno.auth.roles`) on a pool (the one its
path names, or its ``pool`` / ``ref`` query parameter) or on the lake as a whole.
:func:`guard` runs before each operation, after FastAPI has parsed the request but
before the route does any work: it authenticates the caller (HTTP Basic, 401
without valid credentials) and checks the rule (403), so that a forbidden request
changes nothing. A route that is not in the table needs ``admin``: a new route is
closed until someone decides who may call it.

The rules, by kind of operation:

=======================================================  ======  ===================
operation                                                action  on
=======================================================  ======  ===================
list pools, meta tables, query, verify (all), events     read    the lake
create a pool                                            write   the lake
read a pool (scan, get, log, diff, objects, status,      read    the pool
stat, read, list files ...)
write a pool (load, commit, merge, branch, compact,      write   the pool
vacuum, drop, rename, put, rm, discard files ...)
merge requests: list, show, compare                      read    the pool
merge requests: open, merge, close                       write   the pool
hooks (add, remove: a hook runs commands on the server)  admin   the lake
set a pool's iterators                                   write   the pool
... naming a python() iterator (it runs in the server)   admin   the lake
ingest (submit URLs the server reads with its own keys)  admin   the lake
import files (a directory or s3:// the server reads)     admin   the lake
protect, unprotect a branch (binds every writer)         admin   the lake
users, keys and grants (``/v1/auth/...``)                admin   the lake
schema registry (``/registry/...``): schemas, subjects,   read    the lake
versions, levels, compatibility tests
schema registry: register, delete, set a level           write   the lake
=======================================================  ======  ===================

A query's pools are checked as it names them (``readable``: the caller's grants),
and a pool the caller may not read is left out of the pool list.

Missing versus forbidden: a pool that does not exist is 404 for every caller (also a
dropped one whose id the guard remembers: a refusal looks the pool up again first);
one that exists but the caller may not use is 403. The 403 names the pool by its
name only to a caller who may read it (who can list that name anyway); to others it
repeats what the request named (a name or an id), so no answer tells a caller a pool
name it could not see. (403 versus 404 does tell whether a pool of a given name or
id exists, as in any API that refuses before looking further.) ``--no-auth``
servers (no authenticator) let every request through, as a lake opened directly.

Commit authors: the authenticated user's name. An admin may name another author
(a service that commits on behalf of people); anyone else naming an author other
than their own name gets 403.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from starlette.concurrency import run_in_threadpool

from limno.auth.roles import allowed, check
from limno.core.refs import parse_pool_ref
from limno.errors import ForbiddenError, LimnoError, NotFoundError

if TYPE_CHECKING:
    from limno.auth.model import User
    from limno.auth.verify import Authenticator

__all__ = [
    "RULES",
    "Rule",
    "allowed_at_once",
    "author_of",
    "check_spark_settings",
    "guard",
    "readable_of",
    "require_admin",
    "user_of",
    "visible",
]

#: where a rule's pool comes from: none (the lake), the path's ``{pool}``, the ``pool``
#: query parameter when given (else the lake), the pool of the ``ref`` query parameter
Scope = Literal["lake", "path", "query", "ref"]


@dataclass(frozen=True)
class Rule:
    """What an operation needs: ``action`` on the pool ``scope`` names."""

    action: Literal["read", "write", "admin"]
    scope: Scope = "lake"


_R_LAKE, _W_LAKE, _ADMIN = Rule("read"), Rule("write"), Rule("admin")
_R, _W = Rule("read", "path"), Rule("write", "path")

#: operation id -> rule (operation ids: the routes' ``operation_id``)
RULES: dict[str, Rule] = {
    # pools
    "list_pools": _R_LAKE,
    "create_pool": _W_LAKE,
    "get_pool": _R,
    "drop_pool": _W,
    "rename_pool": _W,
    # a pool's iterators: a writer's, as at create_pool; but a python() one is code the
    # server runs in its own process, so naming one needs admin (both: require_admin)
    "set_iterators": _W,
    # refs
    "branches": _R,
    "create_branch": _W,
    "delete_branch": _W,
    # protected branches: the rules bind every writer of the pool, so only an admin
    # sets or lifts them (lakeFS: branch protection is a repository admin's)
    "protected_branches": _R,
    "protect_branch": _ADMIN,
    "unprotect_branch": _ADMIN,
    "tags": _R,
    "create_tag": _W,
    "delete_tag": _W,
    "resolve": _R,
    "log": _R,
    "merge": _W,
    "diff": _R,
    "cherry_pick": _W,
    "reset": _W,
    "revert": _W,
    "hooks": _R,
    "add_hook": _ADMIN,
    "remove_hook": _ADMIN,
    # merge requests: opening, merging and closing one is a writer's (merging into a
    # protected branch is a merge, which protection allows); reading and comparing a reader's
    "merge_requests": _R,
    "merge_request": _R,
    "compare": _R,
    "open_merge_request": _W,
    "merge_merge_request": _W,
    "close_merge_request": _W,
    # data
    "load": _W,
    "add": _W,
    "staged": _R,
    "unstage": _W,
    "commit": _W,
    "delete_objects": _W,
    "delete_where": _W,
    "scan": _R,
    "get": _R,
    "objects": _R,
    "pool_meta_table": _R,
    # file pools: reads and staged writes as for records; an import registers what the
    # server itself reads (its directories, S3 with its credentials), which may reach
    # what the caller should not (any file of the server's machine): an admin's
    "files_stat": _R,
    "files_read": _R,
    "files_list": _R,
    "files_diff": _R,
    "files_uncommitted": _R,
    "files_put": _W,
    "files_copy": _W,
    "files_remove": _W,
    "files_remove_prefix": _W,
    "files_commit": _W,
    "files_discard": _W,
    "files_import": _ADMIN,
    # search indexes: creating and dropping one is a commit
    "indexes": _R,
    "create_index": _W,
    "drop_index": _W,
    "search": _R,
    # query: each pool the SQL names is checked as it is read (readable_of)
    "query": _R_LAKE,
    "meta_table": Rule("read", "ref"),
    # maintenance
    "compact": _W,
    "split": _W,
    "vacuum": _W,
    "status": _R,
    # the ingest batcher: uploads are a writer's; URLs the server reads with its own
    # credentials (which may reach what the caller should not) are an admin's
    "ingest_add": _W,
    "ingest_submit": _ADMIN,
    "ingest_run": _W,
    "ingest_files": _R,
    "ingest_jobs": _R,
    "ingest_retry": _W,
    "ingest_drop": _W,
    "ingest_settings": _R,
    "ingest_configure": _W,
    "verify": Rule("read", "query"),
    # events: the route shows only events of pools the caller may read (a dropped
    # pool's past events too, so no pool lookup here)
    "events": _R_LAKE,
    # users, keys and grants
    "auth_users": _ADMIN,
    "auth_user": _ADMIN,
    "auth_create_user": _ADMIN,
    "auth_delete_user": _ADMIN,
    "auth_keys": _ADMIN,
    "auth_create_key": _ADMIN,
    "auth_delete_key": _ADMIN,
    "auth_grants": _ADMIN,
    "auth_grant": _ADMIN,
    "auth_revoke": _ADMIN,
    # the schema registry (Confluent's API at /registry): its schemas serve every topic
    # of the lake, so reading is a lake reader's and changing a lake writer's (as
    # creating a pool); a compatibility test changes nothing
    "registry_root": _R_LAKE,
    "registry_types": _R_LAKE,
    "registry_schema": _R_LAKE,
    "registry_schema_versions": _R_LAKE,
    "registry_subjects": _R_LAKE,
    "registry_lookup": _R_LAKE,
    "registry_versions": _R_LAKE,
    "registry_version": _R_LAKE,
    "registry_version_schema": _R_LAKE,
    "registry_config": _R_LAKE,
    "registry_subject_config": _R_LAKE,
    "registry_compatibility": _R_LAKE,
    "registry_register": _W_LAKE,
    "registry_delete_subject": _W_LAKE,
    "registry_delete_version": _W_LAKE,
    "registry_set_config": _W_LAKE,
    "registry_set_subject_config": _W_LAKE,
    "registry_delete_subject_config": _W_LAKE,
}


def rule_of(request: Request) -> Rule:
    """The rule of the request's operation (``admin`` for one not in the table)."""
    route = request.scope.get("route")
    operation = getattr(route, "operation_id", None)
    return RULES.get(str(operation), _ADMIN)


#: declares HTTP Basic in the OpenAPI document (and /docs' "Authorize"); the header is
#: checked by :func:`guard`, which answers a missing one with limno's own 401
_BASIC = HTTPBasic(auto_error=False, realm="limno", description="access key id : secret")


async def guard(
    request: Request, _declared: Annotated[HTTPBasicCredentials | None, Depends(_BASIC)]
) -> None:
    """Authenticate the caller and check the operation's rule, before any work.

    Sets ``request.state.user`` (None on a ``--no-auth`` server). On the event loop:
    a key the authenticator remembers and a pool id seen before cost no I/O and no
    thread hop (a fraction of a millisecond per request); only reading the auth
    store or the pool registry goes to the thread pool.
    """
    authenticator: Authenticator | None = request.app.state.authenticator
    if authenticator is None:
        request.state.user = None
        return
    header = request.headers.get("authorization")
    user = authenticator.authenticate_remembered(header)
    if user is None:
        user = await run_in_threadpool(authenticator.authenticate_header, header)
    request.state.user = user
    rule = rule_of(request)
    if rule.action == "admin":
        check(user, "admin")
        return
    pool = _pool_param(request, rule.scope)
    if pool is None:
        check(user, rule.action)
        return
    ids = _ids_of(request)
    remembered = found = ids.get(pool)
    if found is None:
        found = await run_in_threadpool(_pool_id, request, pool)
    if not allowed(user, rule.action, found[0]):
        if remembered is not None:  # the pool may be gone since: 404, for anyone
            ids.pop(pool, None)
            found = await run_in_threadpool(_pool_id, request, pool)
        # named as the caller named it, unless the caller may read it (and list its name)
        shown = found[1] if allowed(user, "read", found[0]) else pool
        check(user, rule.action, found[0], what=f"pool {shown}")


def allowed_at_once(request: Request, operation: str, pool: str) -> bool:
    """Whether :func:`guard` would let ``operation`` on the path's ``pool`` through
    without reading anything (the caller's key and the pool's id remembered): for the
    fast paths of :mod:`limno.server.fast`, which hand every other request to the full
    route, where :func:`guard` decides. False means "ask the guard", not "forbidden"."""
    authenticator: Authenticator | None = request.app.state.authenticator
    if authenticator is None:
        return True
    rule = RULES.get(operation, _ADMIN)
    if rule.scope != "path" or rule.action == "admin":
        return False
    try:
        user = authenticator.authenticate_remembered(request.headers.get("authorization"))
    except LimnoError:
        return False
    found = _ids_of(request).get(pool)
    if user is None or found is None or not allowed(user, rule.action, found[0]):
        return False
    request.state.user = user
    return True


def _pool_param(request: Request, scope: Scope) -> str | None:
    if scope == "path":
        return str(request.path_params.get("pool") or "") or None
    if scope == "query":
        return request.query_params.get("pool") or None
    if scope == "ref":
        ref = request.query_params.get("ref") or ""
        return parse_pool_ref(ref)[0] if ref else None
    return None


#: pool ids the guard remembers at most (then it starts over)
_IDS = 10_000


def _ids_of(request: Request) -> dict[str, tuple[str, str]]:
    """The app's pool ids seen so far: id -> (id, name). An id never names another
    pool, so it is remembered for good (the name only words a 403); a pool dropped
    since is refused by the route itself (404). Names are not remembered: one may
    name another pool tomorrow."""
    state = request.app.state
    ids: dict[str, tuple[str, str]] | None = getattr(state, "guard_pool_ids", None)
    if ids is None:
        ids = state.guard_pool_ids = {}
    return ids


def _pool_id(request: Request, pool: str) -> tuple[str, str]:
    """(id, name) of the pool named ``pool`` (a name or an id)."""
    config = request.app.state.lake.registry.find(pool)
    found = str(config.id), str(config.name)
    if found[0] == pool:
        ids = _ids_of(request)
        if len(ids) >= _IDS:
            ids.clear()
        ids[pool] = found
    return found


def user_of(request: Request) -> User | None:
    """The authenticated caller (None on a ``--no-auth`` server)."""
    user: User | None = getattr(request.state, "user", None)
    return user


def require_admin(request: Request, what: str) -> None:
    """403 unless the caller is an admin (nothing without auth): for a body that asks for
    more than its route's rule allows, as a ``create_pool`` naming a python() iterator."""
    user = user_of(request)
    if user is not None:
        check(user, "admin", what=what)


def author_of(request: Request, given: str | None) -> str | None:
    """The author of a commit the request makes: the caller's name; ``given`` (the
    client's ``--author``) only from an admin, or when it is the caller's own name
    (403 otherwise). Without auth, ``given`` as it is (None: the server's default)."""
    user = user_of(request)
    if user is None:
        return given
    if given and given != user.name:
        if user.role != "admin":
            raise ForbiddenError(
                f"user {user.name!r} ({user.role}) may not commit as {given!r}:"
                " only an admin may name another author"
            )
        return given
    return user.name


def check_spark_settings(request: Request, master: str | None, conf: object) -> None:
    """Spark's master and configuration are the server's to decide: a request may set
    them (``spark_master``, ``spark_conf``) only from an admin (403 otherwise), since a
    setting such as ``spark.driver.extraJavaOptions`` runs what it names on the server.
    Every route that can run Spark checks this before doing any work."""
    user = user_of(request)
    if (master or conf) and user is not None and user.role != "admin":
        raise ForbiddenError(
            f"user {user.name!r} ({user.role}) may not set Spark's master or configuration:"
            " the server decides them"
        )


def readable_of(request: Request) -> Callable[[str], bool] | None:
    """Whether the caller may read a pool, by name (None: every pool, without auth)."""
    user = user_of(request)
    if user is None or user.role == "admin":
        return None
    lake = request.app.state.lake
    caller = user

    def readable(name: str) -> bool:
        try:
            pool_id = str(lake.registry.find(name).id)
        except NotFoundError:
            return True  # the query fails on the missing pool itself, with its own error
        return allowed(caller, "read", pool_id)

    return readable


def visible(request: Request, pool_ids: list[str]) -> list[bool]:
    """For each pool id, whether the caller may read that pool (list and meta views)."""
    user = user_of(request)
    if user is None:
        return [True] * len(pool_ids)
    return [allowed(user, "read", p) for p in pool_ids]
