"""Protected branches over HTTP: the part of :class:`~limno.api.remote.RemotePool` that
calls ``/v1/pools/{pool}/protected``, ``protect`` and ``unprotect``.

The branch travels in a JSON body, not in the path, so that the server's lake sees
the name exactly as the caller wrote it and refuses a bad one in its own words, as a
lake opened directly does. Protecting needs the admin role on the server (see
:mod:`limno.server.authorization`); a refused write comes back as the
ProtectedBranchError the server raised, with its message.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RemoteProtection"]


class RemoteProtection:
    """Mixin of :class:`~limno.api.remote.RemotePool`: protect, unprotect, protected."""

    def _call(self, method: str, op: str, params: Any = None, body: Any = None) -> Any:
        raise NotImplementedError  # RemotePool's: one request to the pool's routes

    def protect(self, branch: str) -> bool:
        return bool(self._call("POST", "protect", body={"branch": branch})["changed"])

    def unprotect(self, branch: str) -> bool:
        return bool(self._call("POST", "unprotect", body={"branch": branch})["changed"])

    def protected(self) -> list[str]:
        return [str(b) for b in self._call("GET", "protected")]
