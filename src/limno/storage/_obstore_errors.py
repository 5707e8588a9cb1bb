"""obstore's errors in limno's tree: which exception a failed call of the store raises,
and the words it says (``cannot write /lake/pools/3: permission denied``), apart from
the backend that makes the calls (:mod:`limno.storage._obstore`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from limno.errors import (
    AlreadyExistsError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
    StorageError,
    os_reason,
    storage_error,
)
from limno.lazy import lazy_module

if TYPE_CHECKING:
    from obstore import exceptions as oe
else:
    oe = lazy_module("obstore.exceptions")

__all__ = ["translated"]

T = TypeVar("T")


#: how obstore reports a local filesystem failure inside its message: ``(os error 13)``
_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def translated(path: str, fn: Callable[[], T], action: str = "access", where: str = "") -> T:
    """Run an obstore call, translating its errors into limno's tree.

    A failure of the store itself becomes ``cannot ACTION WHERE: REASON`` (``where``
    is the object's full location, a file path on a local lake; default ``path``),
    with the errno's words when the store failed on a local file: ``cannot write
    /lake/pools/3: permission denied``, ``...: no space left on device``.
    """
    try:
        try:
            return fn()
        except Exception as e:
            if _NO_SUCH_BUCKET in str(e):
                raise _no_bucket(str(e), path, where) from e
            raise
    except LimnoError:
        raise
    except (oe.NotFoundError, FileNotFoundError) as e:
        raise NotFoundError(f"object not found: {path}") from e
    except oe.AlreadyExistsError as e:
        raise AlreadyExistsError(f"object already exists: {path}") from e
    except oe.PreconditionError as e:
        raise PreconditionFailedError(f"precondition failed: {path}") from e
    except oe.InvalidPathError as e:
        raise InvalidInputError(f"invalid object path: {path!r}") from e
    except (oe.PermissionDeniedError, oe.UnauthenticatedError) as e:
        raise StorageError(f"cannot {action} {where or path}: permission denied") from e
    except OSError as e:
        raise storage_error(action, where or path, e) from e
    except oe.BaseError as e:
        text = str(e)
        code = _OS_ERROR.search(text)
        reason = os_reason(int(code.group(1))) if code else _first_line(text, e)
        raise StorageError(f"cannot {action} {where or path}: {reason}") from e


#: S3's error code for a request to a bucket that does not exist (in the response body)
_NO_SUCH_BUCKET = "<Code>NoSuchBucket</Code>"


def _no_bucket(text: str, path: str, where: str) -> InvalidInputError:
    """``s3://nosuch/lake: bucket 'nosuch' does not exist``: the lake location is wrong,
    which a bare 404 ("object not found: pools/TAIL") would hide."""
    uri = where or path
    if where.endswith("/" + path.strip("/")):
        uri = where[: len(where) - len(path.strip("/"))].rstrip("/")
    found = re.search(r"<BucketName>([^<]*)</BucketName>", text)
    bucket = found.group(1) if found else uri.split("://", 1)[-1].split("/", 1)[0]
    return InvalidInputError(f"{uri}: bucket {bucket!r} does not exist")


def _first_line(text: str, err: BaseException) -> str:
    return text.splitlines()[0] if text.strip() else type(err).__name__
