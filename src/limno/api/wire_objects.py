"""The stored-objects form of a scan's answer, shared by the server and its client.

A full scan of a snapshot whose objects do not overlap (and that no iterator
rewrites) is the objects' rows, object after object, in key order: the server need
not decode and re-encode anything. Asked with ``Accept: application/vnd.limno.
parquet-objects`` (next to Arrow IPC, its fallback), it answers with the stored
Parquet bytes as they are, and the client decodes them (Arrow decodes Parquet in
native code, off the GIL): on a machine where client and server share the cores,
the server's decoding and Arrow IPC encoding, and a third more bytes on the wire,
are saved. A scan the server must merge (overlapping objects, iterators, clipped
objects, keyless rows, bounds, ranges, a limit) answers with Arrow IPC as before;
the client reads whichever form comes (by the answer's ``Content-Type``).

The body is a sequence of frames, each a :data:`FRAME` head (one kind byte, a
little-endian 64-bit payload length) and its payload:

    S  the scan's schema (an Arrow IPC schema message): every table is this one
    F  the next object: its size and the length of its id (:data:`OBJECT`), its id
       (UTF-8), then its last bytes (the Parquet footer, its length and the magic),
       sent first so that the client can decode row groups as the rest arrives
    D  the rest of that object: its first ``size - len(footer)`` bytes
    E  an error after the answer began, between two objects (a problem document
       as JSON, as in :mod:`limno.server.problems`): the client raises it; a body
       of declared length (the server sends one when it knows every object's
       size) stops right after it
    Z  the end (empty): a body without it was cut short

Objects come in scan order (for ``order=desc`` the last object first; the client
reverses rows within each).
"""

from __future__ import annotations

import struct

__all__ = ["DATA", "END", "ERROR", "FOOTER", "FRAME", "MEDIA", "OBJECT", "SCHEMA", "frame"]

MEDIA = "application/vnd.limno.parquet-objects"

SCHEMA = b"S"
FOOTER = b"F"
DATA = b"D"
ERROR = b"E"
END = b"Z"

#: a frame's head: kind, payload length
FRAME = struct.Struct("<cQ")
#: the start of an F frame: the object's size, the length of its id
OBJECT = struct.Struct("<QH")


def frame(kind: bytes, length: int) -> bytes:
    """The head of a frame of ``kind`` whose payload is ``length`` bytes."""
    return FRAME.pack(kind, length)
