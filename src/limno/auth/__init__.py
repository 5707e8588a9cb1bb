"""Users, API keys, roles and per-pool grants, kept in the lake (``<lake>/auth/``).

:mod:`~limno.auth.roles` decides what a user may do, :mod:`~limno.auth.store` keeps
users, keys and grants in a journal, :mod:`~limno.auth.crypto` seals key secrets
with the server secret, and :mod:`~limno.auth.verify` checks a request's
credentials (server) and finds the caller's (client). A lake opened directly (a
path or an S3 URL) is not guarded: whoever can reach its bytes can do anything,
as before; a server checks every request with this package.

Importing this package is cheap: ``cryptography`` loads only to seal or open a secret.
"""

from limno.auth.model import AccessKey, Grant, NewKey, User
from limno.auth.roles import ACTIONS, LEVELS, ROLES, allowed, check

__all__ = ["ACTIONS", "LEVELS", "ROLES", "AccessKey", "Grant", "NewKey", "User", "allowed", "check"]
