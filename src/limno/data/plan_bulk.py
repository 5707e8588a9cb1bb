"""A snapshot's scan plan table made whole in bulk: from its stored ranges' text, in Arrow.

The first reader of a big snapshot that no ancestor's stored plan helps with plans
it whole: :func:`~limno.data.plan_index.plan_table` of a :class:`Plan` of every
object. Made from decoded :class:`DataObject`\\ s that costs about 10 s at 100,000
objects: ``json.loads`` of every entry, a dataclass each, two :class:`SortKey`\\ s
each, every entry encoded again. :func:`plan_table_bulk` makes the same table (byte
for byte) from the ranges' stored text instead:

- each range is matched whole against a strict form of the entries a commit writes
  (``Snapshots`` stores them with sorted keys, no spaces, ASCII only), its fields
  taken as text: where a whole range matches, its entries are exactly what
  ``json.loads`` reads; a range that does not (an entry with other fields, escapes,
  other key types) is decoded the usual way, its entries alone;
- the key ranges become dense integer ranks (Arrow sorts each key field), so the
  clusters are a cumulative maximum over the objects sorted by first key;
- each object's entry text is put together from its fields' texts in the order
  ``DataObject.to_json`` writes them.

It does this for snapshots whose keys are integers or plain text in every object
(each field one kind) and that have no partition tree (no object is clipped); it
returns None otherwise, and the caller plans whole as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.data.keys import PoolKey
from limno.data.numpy_view import fixed_values
from limno.data.objects import DataObject
from limno.data.plan_index import _SCHEMA, FORMAT, KEYLESS, UNREAD, _whole, key_text, row_texts

__all__ = ["entry_fields", "plan_table_bulk"]

# a JSON text without escapes (a range holding a backslash, a control character or
# other than ASCII is decoded the usual way: then every text of it is one of these)
_PLAIN = r'[^"]*'
_INT = r"-?(?:0|[1-9][0-9]*)"
_ELEMENT = f'(?:{_INT}|"{_PLAIN}")'
_KEY = rf"(?:null|\[{_ELEMENT}(?:,{_ELEMENT})*\])"
_TEXTS = rf'\[(?:"{_PLAIN}"(?:,"{_PLAIN}")*)?\]'
#: one entry of a range as ``Snapshots`` stores an object's (keys sorted, no spaces),
#: its schema cut out (:func:`_matched`), the whole of it the first group
_ENTRY = re.compile(
    rf'(\["({_PLAIN})",\{{"created":"({_PLAIN})"'
    rf'(,"extra":\{{"order":\["({_PLAIN})","({_PLAIN})"\]\}})?'
    rf',"id":"({_PLAIN})","key_types":({_TEXTS}),"keyless":({_INT})'
    rf',"max_key":({_KEY}),"min_key":({_KEY})'
    rf'(?:,"partitions":({_TEXTS}))?(?:,"replaces":({_TEXTS}))?'
    rf',"rows":({_INT}),"schema":"","size":({_INT})\}}\](?:,|$))'
)
#: a schema field's start (in a range without escapes: only ever a field)
_SCHEMA_AT = '"schema":"'
_HEAD, _TAIL = b'{"entries":[', b"]}"
#: the fields :func:`entry_fields` gives (string columns, one row an object): the
#: range key (dropped), :data:`_ENTRY`'s other groups, the schema, the entry if decoded
FIELDS = (
    "key",
    "created",
    "extra",
    "order0",
    "order1",
    "id",
    "key_types",
    "keyless",
    "max_key",
    "min_key",
    "partitions",
    "replaces",
    "rows",
    "size",
    "schema",
    "entry",
)


def entry_fields(
    ranges: Iterable[bytes], skip: tuple[str, ...]
) -> tuple[pa.Table, list[str]] | None:
    """The object entries of a snapshot's ranges (stored bytes, in order), as a table
    of their fields' texts (:data:`FIELDS`; entries under keys starting with ``skip``
    left out) with the distinct schemas (``schema_code`` numbers them), or None when a
    range is not JSON.

    A range whose entries :data:`_ENTRY` matches one after the other, end to end, is
    those entries exactly (``entry`` null: the other fields say it all). Another is
    decoded the usual way, its ``entry`` as ``plan_table`` stores it."""
    rows: list[tuple[str | None, ...]] = []
    for data in ranges:
        matched = _matched(data, skip)
        if matched is not None:
            rows += matched
            continue
        try:
            doc = json.loads(data)
            for k, value in doc["entries"]:
                if not k.startswith(skip):
                    rows.append(_decoded_fields(k, DataObject.from_json(value, k)))
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
            return None  # not a range document: the usual path names it
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FIELDS)
    schemas: dict[str, int] = {}  # a pool's objects share a few: numbered
    codes = [schemas.setdefault(t, len(schemas)) for t in columns[FIELDS.index("schema")]]
    table = pa.table(
        {n: pa.array(c, pa.string()) for n, c in zip(FIELDS, columns, strict=True) if n != "schema"}
    )
    table = table.append_column("schema_code", pa.array(codes, pa.int64()))
    return table.drop_columns(["key"]), list(schemas)


def _matched(data: bytes, skip: tuple[str, ...]) -> list[tuple[str | None, ...]] | None:
    """Each entry of a range's stored bytes as its fields, when every entry matches
    :data:`_ENTRY` and the matches tile the range; else None.

    The schemas (most of the bytes) are cut out first, each at its field's start up
    to the next quote (no text holds one): the match then reads a sixth of the
    bytes, and the i-th entry it finds has the i-th schema cut (the one schema field
    of each)."""
    if not (data.startswith(_HEAD) and data.endswith(_TAIL) and data.isascii()):
        return None
    if b"\\" in data or int(np.frombuffer(data, np.uint8).min()) < 0x20:
        return None
    parts = data.decode("ascii").split(_SCHEMA_AT)
    schemas = []
    kept = [parts[0]]
    for part in parts[1:]:
        end = part.find('"')
        schemas.append(part[:end])
        kept.append(part[end:])
    text = _SCHEMA_AT.join(kept)
    found = _ENTRY.findall(text, len(_HEAD), len(text) - len(_TAIL))
    covered = sum(len(m[0]) for m in found)
    if covered != len(text) - len(_HEAD) - len(_TAIL) or len(found) != len(schemas) or not found:
        return None
    if any(m[1].startswith(skip) for m in found):
        return None
    return [(*m[1:], schema, None) for m, schema in zip(found, schemas, strict=True)]


def _decoded_fields(k: str, obj: DataObject) -> tuple[str | None, ...]:
    """``obj``'s fields (as :func:`entry_fields` gives a decoded entry's)."""
    order = obj.extra.get("order") if obj.extra else None
    _, entry, _ = row_texts(obj)
    values = {
        "key": k,
        "created": obj.created,
        "extra": "order" if order else None,
        "order0": str(order[0]) if order else None,
        "order1": str(order[1]) if order else None,
        "id": obj.id,
        "keyless": str(obj.keyless),
        "max_key": key_text(obj.max_key),
        "min_key": key_text(obj.min_key),
        "schema": obj.schema_b64,
        "entry": entry,
    }
    return tuple(values.get(name) for name in FIELDS)


def plan_table_bulk(
    fields: pa.Table, schemas: list[str], key: PoolKey, metadata: Mapping[str, str]
) -> pa.Table | None:
    """The plan table of the objects of ``fields`` and ``schemas`` (:func:`entry_fields`;
    none clipped), as ``plan_table(Plan(objects), ...)`` makes it for them in write
    order; None when a key is not integers or plain text (one kind a field) or a key
    range is inverted. ``metadata``: as ``plan_table`` takes it."""
    n = fields.num_rows
    given = {name: _whole(fields.column(name)) for name in fields.column_names}
    # -- write order: (created, id), or the object's recorded order; ties: entry order
    has_order = _has_order(given["extra"])
    major = pc.if_else(has_order, given["order0"], given["created"])
    minor = pc.if_else(has_order, given["order1"], given["id"])
    by_write = pa.table({"a": major, "b": minor})
    order = pc.sort_indices(by_write, sort_keys=[("a", "ascending"), ("b", "ascending")])
    keyless = _ints(pc.cast(given["keyless"], pa.int64()).take(order))
    lows = _nulled(given["min_key"].take(order))
    highs = _nulled(given["max_key"].take(order))
    has_low = np.asarray(pc.is_valid(lows), bool)
    keyed = np.flatnonzero(has_low & np.asarray(pc.is_valid(highs), bool))
    at = pa.array(keyed)
    ranks = _ranks(key, lows.take(at), highs.take(at), len(keyed))
    if ranks is None:
        return None
    first, last = ranks
    if bool(np.any(last < first)):
        return None

    # -- clusters: objects sorted by first key (ties in write order), cut where the
    # furthest last key so far ends before the next first key
    by_first = np.argsort(first, kind="stable")
    reach = np.maximum.accumulate(last[by_first])
    starts = np.ones(len(keyed), bool)
    starts[1:] = reach[:-1] < first[by_first][1:]
    cluster = np.empty(len(keyed), np.int64)
    cluster[by_first] = np.cumsum(starts) - 1
    lo_rows = keyed[by_first[starts]]
    ends = reach[np.append(np.flatnonzero(starts)[1:] - 1, len(keyed) - 1)] if len(keyed) else reach
    holder = np.zeros(int(last.max()) + 1 if len(last) else 0, np.int64)
    holder[last] = keyed
    hi_rows = holder[ends]

    # -- the rows: clusters in key order (members in write order), keyless, the rest
    is_tail = ~has_low & (keyless > 0)
    rest = np.ones(n, bool)
    rest[keyed] = False
    rest &= ~is_tail
    by_cluster = np.argsort(cluster, kind="stable")
    rows = np.concatenate([keyed[by_cluster], np.flatnonzero(is_tail), np.flatnonzero(rest)])
    row_cluster = np.concatenate(
        [
            cluster[by_cluster],
            np.full(int(is_tail.sum()), KEYLESS),
            np.full(int(rest.sum()), UNREAD),
        ]
    ).astype(np.int64)
    tail = ((row_cluster != UNREAD) & (keyless[rows] > 0)).astype(np.int8)
    firsts = np.flatnonzero(np.diff(row_cluster[: len(keyed)], prepend=-1) != 0)
    lo_at = np.full(n, -1, np.int64)
    hi_at = np.full(n, -1, np.int64)
    lo_at[firsts], hi_at[firsts] = lo_rows, hi_rows
    source = _ints(order)[rows]  # each row's object in the order of ``fields``
    codes = _ints(given["schema_code"])
    written = codes[_ints(order)]
    seen = np.unique(written, return_index=True)[1]
    meta = {
        **metadata,
        "limno.plan": FORMAT,
        "schemas": json.dumps([t for t in (schemas[c] for c in written[np.sort(seen)]) if t]),
    }
    columns = [
        pa.array(row_cluster, pa.int64()),
        pa.array(rows, pa.int64()),
        pa.array(rows, pa.int64()),
        pa.array(tail, pa.int8()),
        _cells(given["min_key"].take(order), lo_at),
        _cells(given["max_key"].take(order), hi_at),
        pa.nulls(n, pa.string()),
        _first_seen(codes[source], schemas),
        _entries(given).take(pa.array(source)),
    ]
    return pa.Table.from_arrays(columns, schema=_SCHEMA.with_metadata(meta))


def _has_order(extra: pa.Array) -> pa.Array:
    """Whether an object records its order (``extra``: empty or null when not)."""
    return pc.fill_null(pc.not_equal(extra, ""), False)


def _nulled(keys: pa.Array) -> pa.Array:
    """Key texts with ``null`` (no keyed row) as a null."""
    return pc.if_else(pc.equal(keys, "null"), pa.scalar(None, pa.string()), keys)


def _ints(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer array without nulls as numpy's (not through pandas)."""
    whole = _whole(array) if isinstance(array, pa.ChunkedArray) else array
    return fixed_values(whole, np.int64 if whole.type == pa.int64() else np.uint64).astype(np.int64)


def _first_seen(codes: np.ndarray, schemas: list[str]) -> pa.DictionaryArray:
    """The schema column of rows of schema numbers ``codes``, dictionary encoded as
    ``dictionary_encode`` makes it (values in first-seen order)."""
    values, firsts, inverse = np.unique(codes, return_index=True, return_inverse=True)
    by_first = np.argsort(firsts)
    renumber = np.empty(len(values), np.int32)
    renumber[by_first] = np.arange(len(values), dtype=np.int32)
    dictionary = pa.array([schemas[int(c)] for c in values[by_first]], pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(renumber[inverse], pa.int32()), dictionary)


def _cells(values: pa.Array, at: np.ndarray) -> pa.Array:
    """``values[at]`` (a string column), null where ``at`` is -1."""
    return values.take(pa.array(at, pa.int64(), mask=at < 0))


def _entries(cols: Mapping[str, pa.Array]) -> pa.Array:
    """Each object's entry as ``DataObject.to_json`` writes it (the schema apart): made
    from its fields' texts, or as given (an entry decoded the usual way)."""

    def optional(name: str, prefix: str, suffix: str = "") -> pa.Array:
        values = cols[name]
        empty = pc.or_kleene(pc.is_null(values), pc.is_in(values, pa.array(["", "[]"])))
        made = pc.binary_join_element_wise(prefix, values, suffix, "")
        return pc.if_else(empty, "", made)

    has_order = _has_order(cols["extra"])
    extra = pc.binary_join_element_wise(
        ',"extra":{"order":["', cols["order0"], '","', cols["order1"], '"]}', ""
    )
    made = pc.binary_join_element_wise(
        '{"id":"',
        cols["id"],
        '","rows":',
        cols["rows"],
        ',"size":',
        cols["size"],
        ',"min_key":',
        cols["min_key"],
        ',"max_key":',
        cols["max_key"],
        ',"keyless":',
        cols["keyless"],
        ',"key_types":',
        cols["key_types"],
        ',"created":"',
        cols["created"],
        '"',
        pc.if_else(has_order, extra, ""),
        optional("replaces", ',"replaces":'),
        optional("partitions", ',"partitions":'),
        "}",
        "",
    )
    given = cols["entry"]
    return pc.if_else(pc.is_valid(given), given, made)


def _ranks(
    key: PoolKey, lows: pa.Array, highs: pa.Array, m: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Dense ranks (the pool's key order; equal keys equal ranks) of the keys ``lows``
    and ``highs`` (their JSON texts), or None when a key field is not all integers
    or all plain text."""
    n = len(key.fields)
    both = pa.concat_arrays([lows, highs])
    element = r'-?(?:0|[1-9][0-9]*)|"[^"\\]*"'  # text without escapes (decoded ranges')
    pattern = r"^\[" + ",".join(f"(?P<f{i}>{element})" for i in range(n)) + r"\]$"
    parts = pc.extract_regex(both, pattern)
    if parts.null_count:
        return None
    per_field = []
    for i, field in enumerate(key.fields):
        texts = pc.struct_field(parts, [i])
        quoted = pc.starts_with(texts, '"')
        if pc.all(quoted).as_py():
            values: pa.Array = pc.utf8_slice_codeunits(texts, 1, -1)
        elif not pc.any(quoted).as_py():
            try:
                values = pc.cast(texts, pa.int64())
            except pa.ArrowInvalid:
                return None  # past int64: compared in Python
        else:
            return None
        rank = np.asarray(pc.rank(values, "ascending", tiebreaker="dense"), np.int64)
        per_field.append(-rank if field.descending else rank)
    if n == 1:
        joint = per_field[0]
    else:
        order = np.lexsort(per_field[::-1])
        stacked = np.stack(per_field)[:, order]
        changed = np.ones(len(order), bool)
        changed[1:] = np.any(stacked[:, 1:] != stacked[:, :-1], axis=0)
        joint = np.empty(len(order), np.int64)
        joint[order] = np.cumsum(changed)
    joint = joint - joint.min() if len(joint) else joint
    return joint[:m], joint[m:]
