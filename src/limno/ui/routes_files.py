"""A file pool's browser: folders by ``/``, download, upload (drag-and-drop or a file
input, staged on a branch, then committed), and a preview of text, CSV, NDJSON,
Parquet (first rows) and images."""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from limno.errors import InvalidInputError, LimnoError
from limno.ui.pages import (
    Posted,
    Signed,
    Uploading,
    Viewer,
    lake_of,
    page_router,
    redirect,
    render_pool,
)

if TYPE_CHECKING:
    from limno.api.base_files import FilePool

router = page_router()

#: paths and folders a listing page shows
PAGE = 100
#: bytes of a text, CSV or NDJSON object read for its preview
PREVIEW_BYTES = 256 * 1024
#: largest Parquet object previewed (its footer is at its end: read whole)
PREVIEW_PARQUET = 64 * 2**20
#: rows a table preview shows
PREVIEW_ROWS = 20
#: images a browser shows inline (SVG may carry scripts: downloaded instead)
INLINE_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/avif")


def file_pool(request: Request, viewer: Viewer, pool: str, action: str = "read") -> FilePool:
    found = lake_of(request).file_pool(pool)
    viewer.need_pool(action, found.id, found.name, pool)
    return found


def _files_url(pool: FilePool, ref: str, prefix: str = "") -> str:
    query = f"?ref={quote(ref, safe='')}" + (f"&prefix={quote(prefix, safe='')}" if prefix else "")
    return f"/pools/{quote(pool.name, safe='')}/files{query}"


@router.get("/pools/{pool}/files")
def files_page(
    request: Request,
    pool: str,
    viewer: Signed,
    ref: str = "main",
    prefix: str = "",
    after: str = "",
) -> Response:
    found = file_pool(request, viewer, pool)
    listing = found.list(ref, prefix=prefix, delimiter="/", start_after=after, limit=PAGE)
    branches = found.branches()
    staged = found.uncommitted(ref) if ref in branches else []  # the count; a page shown
    crumbs, path = [], ""
    for part in prefix.strip("/").split("/") if prefix else []:
        path += part + "/"
        crumbs.append((part, path))
    return render_pool(
        request,
        "files.html",
        found,
        "files",
        f"{found.name} files",
        ref=ref,
        prefix=prefix,
        crumbs=crumbs,
        listing=listing,
        staged=staged[:PAGE],
        staged_total=len(staged),
        on_branch=ref in branches,
        branches=sorted(branches),
        can_write=viewer.can("write", found.id) and ref in branches,
    )


@router.get("/pools/{pool}/files/download")
def download(request: Request, pool: str, path: str, viewer: Signed, ref: str = "main") -> Response:
    found = file_pool(request, viewer, pool)
    entry = found.stat(path, ref)
    name = path.rsplit("/", 1)[-1] or "download"
    inline = request.query_params.get("inline") == "1" and entry.content_type in INLINE_IMAGES
    disposition = "inline" if inline else f"attachment; filename*=UTF-8''{quote(name, safe='')}"
    return StreamingResponse(
        found.read(path, ref),
        media_type=entry.content_type if inline else "application/octet-stream",
        headers={
            "Content-Disposition": disposition,
            "Content-Length": str(entry.size),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


@router.get("/pools/{pool}/files/view")
def view_page(
    request: Request, pool: str, path: str, viewer: Signed, ref: str = "main"
) -> Response:
    found = file_pool(request, viewer, pool)
    entry = found.stat(path, ref)
    kind, content = _preview(found, ref, entry.path, entry.size, entry.content_type)
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    return render_pool(
        request,
        "file_view.html",
        found,
        "files",
        path,
        ref=ref,
        entry=entry,
        kind=kind,
        content=content,
        back=_files_url(found, ref, folder),
        key_columns=[],
    )


def _preview(pool: FilePool, ref: str, path: str, size: int, content_type: str) -> tuple[str, Any]:
    """What the preview shows: (``image``|``table``|``text``|``none``, its content)."""
    lower = path.lower()
    if content_type in INLINE_IMAGES:
        return "image", None
    try:
        if lower.endswith(".parquet"):
            if size > PREVIEW_PARQUET:
                return "none", f"a Parquet object over {PREVIEW_PARQUET >> 20} MiB: download it"
            return "table", _parquet_rows(b"".join(pool.read(path, ref)))
        head = b"".join(pool.read(path, ref, end=min(size, PREVIEW_BYTES)))
        if lower.endswith(".csv") or content_type == "text/csv":
            return "table", _csv_rows(head, size > len(head))
        if lower.endswith((".ndjson", ".jsonl")) or content_type == "application/x-ndjson":
            return "table", _ndjson_rows(head, size > len(head))
        text = head.decode("utf-8")
    except (UnicodeDecodeError, ValueError, LimnoError) as e:
        return "none", f"no preview: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    except Exception as e:  # pyarrow's parse errors (ArrowInvalid): not a readable table
        return "none", f"no preview: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    return "text", text


def _whole_lines(data: bytes, cut: bool) -> bytes:
    """``data`` without its last, partial line when the object goes on past it."""
    return data[: data.rfind(b"\n") + 1] if cut and b"\n" in data else data


def _csv_rows(data: bytes, cut: bool) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from limno.data import csv_dialect

    text = _whole_lines(data, cut)
    parse = pcsv.ParseOptions(delimiter=csv_dialect.delimiter(text, True))
    return pcsv.read_csv(pa.BufferReader(text), parse_options=parse).slice(0, PREVIEW_ROWS)


def _ndjson_rows(data: bytes, cut: bool) -> Any:
    import pyarrow as pa
    import pyarrow.json as pjson

    return pjson.read_json(pa.BufferReader(_whole_lines(data, cut))).slice(0, PREVIEW_ROWS)


def _parquet_rows(data: bytes) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(pa.BufferReader(data))
    batch = next(parquet.iter_batches(batch_size=PREVIEW_ROWS), None)
    return (
        pa.Table.from_batches([batch]) if batch is not None else parquet.schema_arrow.empty_table()
    )


@router.post("/pools/{pool}/files/upload")
async def upload(
    request: Request, pool: str, path: str, viewer: Uploading, branch: str = "main"
) -> dict[str, Any]:
    """Stage one file's bytes (the raw body, spooled to disk) as ``path`` on ``branch``."""
    if not path or path.endswith("/"):
        raise InvalidInputError("upload: a path that names a file (not a folder)")
    found = await run_in_threadpool(file_pool, request, viewer, pool, "write")
    content_type = request.headers.get("content-type") or None
    with tempfile.SpooledTemporaryFile(max_size=8 * 2**20) as spool:
        async for chunk in request.stream():
            spool.write(chunk)
        spool.seek(0)
        entry = await run_in_threadpool(found.put, branch, path, spool, content_type=content_type)
    return {"path": entry.path, "size": entry.size}


@router.post("/pools/{pool}/files/commit")
def commit(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    found = file_pool(request, viewer, pool, "write")
    branch = form.get("branch", "main")
    made = found.commit(branch, form.get("message", "") or "upload from the web UI", viewer.author)
    folder = f"/pools/{quote(found.name, safe='')}/files"
    return redirect(folder, f"committed {made.id[:12]}", ref=branch, prefix=form.get("prefix", ""))


@router.post("/pools/{pool}/files/discard")
def discard(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    found = file_pool(request, viewer, pool, "write")
    branch = form.get("branch", "main")
    dropped = found.discard(branch)
    folder = f"/pools/{quote(found.name, safe='')}/files"
    return redirect(folder, f"discarded {dropped} staged change(s)", ref=branch)
