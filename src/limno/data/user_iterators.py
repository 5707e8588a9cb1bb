"""User iterators: a pool's own Python class, applied where the built-in iterators are.

Why: dedup, ``sum``/``min``/``max`` and age-off cover the common cases; anything else
(keep the three newest versions of a key, merge JSON documents, drop tombstones)
needs code. A pool names one class, ``python(CLASS,k=v,...)`` among its iterators,
and every reader — scans (both directions), point lookups, SQL, Spark tasks — and
every compaction run it through :func:`limno.data.iterators.apply`, after the
built-in iterators, so that all of them see the same answer.

Where the class comes from:

* ``python(mypkg.mod:TopN,n=3)``: importable. Every process that reads the pool
  (the CLI, ``limno serve``, Spark executors) must be able to import it.
* ``python(TopN,n=3)`` with an iterator file: the file's text is stored in the pool's
  configuration in the lake, identified by its SHA-256 (checked before it runs), so
  every process and the server run the very same code without installing anything.
  It runs as a module of its own (it may import installed packages).

The protocol (duck-typed; :class:`IteratorProtocol` spells it for type checkers)::

    class TopN:
        def __init__(self, key_fields: list[str], options: dict[str, str]) -> None: ...
        def apply(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]: ...

``apply`` gets the keyed rows of a stream as RecordBatches in pool key order (among
equal keys, oldest write first), *every key group whole in one batch*, and yields
RecordBatches or Tables. It may drop rows, add rows, aggregate a group and change
any value except the key; its output must be in key order. Keyless rows bypass it.
Because compaction stores the output and later reads apply the iterator again to
it (merged with newer rows), and because limno cuts the rows of a read into several
``apply`` calls where it likes (a descending scan calls it per batch, compaction per
partition, a Spark read per cluster), the output for a key group must depend on that
group's rows only, and applying the iterator twice must give what applying it once
gives (as for dedup, sums, age-off).

What limno refuses, with one ``error:`` line naming the class: a class it cannot load
or construct, an exception raised by ``apply`` (wrapped, without a traceback),
anything yielded that is not a RecordBatch or Table, output out of key order (the
first out-of-order key is named), rows that lost their key or carry a key outside
the range the iterator has been given, and an ``apply`` that stops before reading
all of its input.

Security: a user iterator is code that runs wherever the pool is read, in the server's
process too. Setting one through a server needs ``admin``
(:mod:`limno.server.authorization`).
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
import threading
import types
from collections.abc import Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from limno.errors import CorruptError, InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

    from limno.data import kway, sort
    from limno.data.keys import PoolKey, SortKey
else:
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    kway = lazy_module("limno.data.kway")
    sort = lazy_module("limno.data.sort")

__all__ = [
    "MAX_FILE_BYTES",
    "IteratorProtocol",
    "UserIterator",
    "attach_file",
    "check",
    "parse_user",
    "run",
]

#: the largest iterator file stored in a pool's configuration
MAX_FILE_BYTES = 256 * 1024
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TARGET = re.compile(rf"(?:{_NAME}(?:\.{_NAME})*:)?{_NAME}(?:\.{_NAME})*")
_OPTION = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


class IteratorProtocol(Protocol):
    """What a user iterator class provides (see the module docstring)."""

    def __init__(self, key_fields: list[str], options: dict[str, str]) -> None: ...

    def apply(self, batches: Iterator[pa.RecordBatch]) -> Iterable[pa.RecordBatch | pa.Table]: ...


@dataclass(frozen=True)
class UserIterator:
    """``python(target,k=v,...)``: ``target`` is ``module:Class`` (importable) or
    ``Class`` (a class of the iterator file ``file``, whose text is ``source``)."""

    target: str
    options: tuple[tuple[str, str], ...] = ()
    file: str | None = None
    sha256: str | None = None
    source: str | None = field(default=None, repr=False)

    @property
    def importable(self) -> bool:
        return ":" in self.target

    @property
    def label(self) -> str:
        """How errors name it: the class, and the file it comes from."""
        return self.target if self.file is None else f"{self.target} ({self.file})"

    def __str__(self) -> str:
        opts = "".join(f",{k}={v}" for k, v in self.options)
        return f"python({self.target}{opts})"

    def describe(self) -> str:
        if self.file is None or self.sha256 is None:
            return str(self)
        return f"{self} from {self.file} (sha256 {self.sha256[:12]})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.target}
        if self.options:
            out["options"] = dict(self.options)
        if self.source is not None:
            out.update(file=self.file, sha256=self.sha256, source=self.source)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserIterator:
        """Inverse of :meth:`to_json`; loads nothing (a client reads configs too)."""
        try:
            options = tuple((str(k), str(v)) for k, v in dict(data.get("options") or {}).items())
            text = f"python({data['class']}{''.join(f',{k}={v}' for k, v in options)})"
            user = parse_user(text, text[len("python(") : -1])
            if data.get("source") is None:
                return user
            return replace(
                user,
                file=str(data["file"]),
                sha256=str(data["sha256"]),
                source=str(data["source"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidInputError(f"invalid user iterator settings: {e}") from e


def parse_user(item: str, args: str) -> UserIterator:
    """The ``python(...)`` item ``item`` with arguments ``args``."""
    target, *rest = [a.strip() for a in args.split(",")]
    if not _TARGET.fullmatch(target):
        raise InvalidInputError(
            f"invalid iterator {item!r}: expected python(module:Class,option=value,...)"
            " or python(Class,...) for a class of the iterator file"
        )
    options: dict[str, str] = {}
    for part in rest:
        name, eq, value = (p.strip() for p in part.partition("="))
        if not eq or not _OPTION.fullmatch(name):
            raise InvalidInputError(
                f"invalid iterator {item!r}: expected option=value, not {part!r}"
            )
        if name in options:
            raise InvalidInputError(f"invalid iterator {item!r}: option {name!r} is given twice")
        options[name] = value
    return UserIterator(target, tuple(options.items()))


def attach_file(
    user: UserIterator | None, text: str | None, name: str | None = None
) -> UserIterator | None:
    """``user`` with the iterator file ``text`` (named ``name``) stored in it; checks
    that a class of a file has its file and an importable class has none."""
    if text is None:
        if user is not None and not user.importable:
            raise InvalidInputError(
                f"iterator {user} names a class of an iterator file, but no file was given"
                " (or name an importable class: python(module:Class))"
            )
        return user
    if user is None:
        raise InvalidInputError(
            "an iterator file needs an iterator python(CLASS,...) naming its class"
        )
    if user.importable:
        raise InvalidInputError(
            f"iterator {user} names an importable class: give python(CLASS) for a class"
            " of the iterator file"
        )
    import hashlib  # not at import: ``limno --help`` loads this module, and no hashing

    data = text.encode("utf-8")
    file = (name or "iterator.py").replace("\\", "/").rsplit("/", 1)[-1] or "iterator.py"
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInputError(
            f"iterator file {file} holds {len(data)} bytes, over the limit of {MAX_FILE_BYTES}"
        )
    return replace(user, file=file, sha256=hashlib.sha256(data).hexdigest(), source=text)


# -- loading -------------------------------------------------------------------------------
_CLASSES: dict[tuple[str | None, str], type] = {}
_LOCK = threading.Lock()
#: what the user's code may raise that becomes one error naming it: ``sys.exit()`` in an
#: iterator file must not end the reading process (a server's) without a word
_USER_ERRORS = (Exception, SystemExit)


def _reason(err: BaseException) -> str:
    """``Type: message``, on one line (an error line is one line; the exception itself
    stays the error's ``__cause__``)."""
    lines = str(err).strip().splitlines()
    text = lines[0].strip() if lines else ""
    if len(text) > 300:
        text = text[:299] + "…"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _file_module(user: UserIterator) -> types.ModuleType:
    """The iterator file as a module of its own, run once per process and digest."""
    import hashlib

    assert user.source is not None and user.sha256 is not None
    if hashlib.sha256(user.source.encode("utf-8")).hexdigest() != user.sha256:
        raise CorruptError(
            f"iterator file {user.file} stored in the pool's configuration does not match"
            f" its SHA-256 {user.sha256[:12]}"
        )
    name = f"limno_iterator_{user.sha256[:20]}"
    found = sys.modules.get(name)
    if found is not None:
        return found
    module = types.ModuleType(name)
    module.__file__ = f"<lake iterator file {user.file} {user.sha256[:12]}>"
    sys.modules[name] = module  # dataclasses and pickling look classes up by module
    try:
        exec(compile(user.source, module.__file__, "exec"), module.__dict__)  # noqa: S102
    except _USER_ERRORS as e:
        sys.modules.pop(name, None)
        raise InvalidInputError(f"iterator {user.label}: cannot load its file: {_reason(e)}") from e
    return module


def load_class(user: UserIterator) -> type:
    """The class ``user`` names (imported, or run from its file), checked to have
    ``apply``; cached per process."""
    cache_key = (user.sha256, user.target)
    with _LOCK:
        found = _CLASSES.get(cache_key)
        if found is not None:
            return found
        if user.source is not None:
            module: Any = _file_module(user)
            path, where = user.target, f"file {user.file}"
        else:
            module_name, _, path = user.target.partition(":")
            where = f"module {module_name}"
            try:
                module = importlib.import_module(module_name)
            except _USER_ERRORS as e:
                raise InvalidInputError(
                    f"iterator {user.label}: cannot import {module_name}: {_reason(e)}"
                ) from e
        obj: Any = module
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                raise InvalidInputError(f"iterator {user.label}: {where} has no class {path!r}")
        if not isinstance(obj, type) or not callable(getattr(obj, "apply", None)):
            raise InvalidInputError(
                f"iterator {user.label}: {path} is not a class with an apply(batches) method"
            )
        _CLASSES[cache_key] = obj
        return obj


def instance(user: UserIterator, key: PoolKey) -> Any:
    """A new instance of the class, made with the key's field names and the options."""
    cls = load_class(user)
    try:
        return cls(list(key.names), dict(user.options))
    except _USER_ERRORS as e:
        raise InvalidInputError(f"iterator {user.label} failed: {_reason(e)}") from e


def check(user: UserIterator, key: PoolKey) -> None:
    """Refuse a user iterator that cannot be loaded or constructed (before it is set)."""
    instance(user, key)


# -- running -------------------------------------------------------------------------------
def run(
    user: UserIterator, key: PoolKey, tables: Iterable[pa.Table], reverse: bool = False
) -> Iterator[pa.Table]:
    """``tables`` (a key-ordered stream; ``reverse``: exactly reversed) through the user
    iterator: whole key groups in, checked output out. Keyless rows pass by."""
    made = instance(user, key)
    runs = _runs(tables, key)
    try:
        if reverse:  # apply runs forward, one batch of whole groups at a time
            for keyed, table in runs:
                if not keyed:
                    yield table
                    continue
                call = _Call(user, key, made, kway.reverse_table(table), iter(()))
                out = list(call.outputs())
                if out:
                    yield kway.reverse_table(kway.concat_unified(out))
            return
        nxt = next(runs, None)
        while nxt is not None:
            keyed, table = nxt
            if not keyed:
                yield table
                nxt = next(runs, None)
                continue
            call = _Call(user, key, made, table, runs)
            yield from call.outputs()
            nxt = None if call.after is None else (False, call.after)
    finally:
        runs.close()


def _runs(tables: Iterable[pa.Table], key: PoolKey) -> Generator[tuple[bool, pa.Table], None, None]:
    """The stream as runs of whole key groups (``True``) and of keyless rows (``False``),
    in stream order: the group at the end of a table is held until the next one
    shows whether it goes on."""
    held: pa.Table | None = None
    for table in tables:
        for keyed, part in _split_keyed(table, key):
            if not keyed:
                if held is not None:
                    yield True, held
                    held = None
                yield False, part
                continue
            if held is not None:
                part = kway.concat_unified([held, part])
            cut = _last_group_start(part, key)
            held = part.slice(cut)
            if cut:
                yield True, part.slice(0, cut)
    if held is not None:
        yield True, held


def _split_keyed(table: pa.Table, key: PoolKey) -> Iterator[tuple[bool, pa.Table]]:
    """``table`` cut into runs of keyed and of keyless rows."""
    n = table.num_rows
    if not n:
        return
    mask = key.keyed_mask(table)
    keyed = mask.true_count
    if keyed in (0, n):
        yield keyed == n, table
        return
    changes = pc.indices_nonzero(pc.not_equal(mask.slice(1), mask.slice(0, n - 1)))
    cuts = [0, *(i + 1 for i in changes.to_pylist()), n]
    for a, b in zip(cuts, cuts[1:], strict=False):
        yield bool(mask[a].as_py()), table.slice(a, b - a)


def _last_group_start(table: pa.Table, key: PoolKey) -> int:
    """The first row of the last key group of a keyed, key-ordered ``table``."""
    n = table.num_rows
    same: Any = None
    for col in key.key_table(table).columns:
        values = col.combine_chunks()
        last = values[n - 1]
        eq = pc.equal(values, last)
        if pa.types.is_floating(values.type) and last.as_py() != last.as_py():
            eq = pc.is_nan(values)  # NaN keys sort together, so they group together
        same = eq if same is None else pc.and_(same, eq)
    others = pc.indices_nonzero(pc.invert(pc.fill_null(same, False)))
    return int(others[-1].as_py()) + 1 if len(others) else 0


_END = object()


def _batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.combine_chunks().to_batches()
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _key_text(k: SortKey) -> str:
    values = [repr(v) if isinstance(v, str | bytes) else str(v) for v in k.key or ()]
    return values[0] if len(values) == 1 else f"({', '.join(values)})"


def _first_key(table: pa.Table, key: PoolKey, last: bool = False) -> SortKey:
    keys = key.key_table(table.slice(table.num_rows - 1 if last else 0, 1))
    return key.sort_key(key.row_key(keys, 0))


class _Call:
    """One ``apply`` call: the batches it is given (a run of keyed tables starting with
    ``first``, then from ``rest`` up to a keyless one, kept in :attr:`after`) and the
    checks of what it yields."""

    def __init__(
        self,
        user: UserIterator,
        key: PoolKey,
        made: Any,
        first: pa.Table,
        rest: Iterator[tuple[bool, pa.Table]],
    ) -> None:
        self.user, self.key, self.made = user, key, made
        self.first, self.rest = first, rest
        self.after: pa.Table | None = None
        self.done = False
        #: an error of the stream itself, passed through ``apply`` unchanged
        self.failure: BaseException | None = None
        self.first_in: SortKey | None = None
        self.last_in: SortKey | None = None
        self.last_out: SortKey | None = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        """What ``apply`` reads; an error raised here (the stream's own, or limno's)
        comes out of ``apply`` as it is, not as the iterator's failure."""
        try:
            table = self.first
            while True:
                if self.first_in is None:
                    self.first_in = _first_key(table, self.key)
                self.last_in = _first_key(table, self.key, last=True)
                yield _batch(table)
                nxt = next(self.rest, None)
                if nxt is None:
                    self.done = True
                    return
                keyed, table = nxt
                if not keyed:
                    self.after, self.done = table, True
                    return
        except BaseException as e:
            self.failure = e
            raise

    @contextlib.contextmanager
    def _user_code(self) -> Iterator[None]:
        """An exception of the iterator's code as one error naming it."""
        try:
            yield
        except _USER_ERRORS as e:
            if e is self.failure:
                raise
            raise InvalidInputError(f"iterator {self.user.label} failed: {_reason(e)}") from e

    def outputs(self) -> Iterator[pa.Table]:
        with self._user_code():
            result = self.made.apply(self.batches())
        try:
            out = iter(result)
        except TypeError:
            raise InvalidInputError(
                f"iterator {self.user.label}: apply returned {type(result).__name__}, not an"
                " iterator of pyarrow RecordBatches"
            ) from None
        try:
            while True:
                with self._user_code():
                    item = next(out, _END)
                if item is _END:
                    break
                table = self._checked(item)
                if table.num_rows:
                    yield table
        finally:
            close = getattr(out, "close", None)
            if close is not None:
                with self._user_code():
                    close()
        if not self.done:
            raise InvalidInputError(
                f"iterator {self.user.label} stopped before reading all of its input"
                " (apply must read every batch)"
            )

    def _checked(self, item: Any) -> pa.Table:
        """``item`` as a table, refused unless it is in key order with keys it was given."""
        label = self.user.label
        if isinstance(item, pa.RecordBatch):
            table = pa.Table.from_batches([item])
        elif isinstance(item, pa.Table):
            table = item
        else:
            raise InvalidInputError(
                f"iterator {label} yielded {type(item).__name__}, not a pyarrow RecordBatch"
                " or Table"
            )
        n = table.num_rows
        if not n:
            return table
        key = self.key
        try:
            keys = key.key_table(table)
        except InvalidInputError as e:
            raise InvalidInputError(f"iterator {label}: {e}") from None
        if keys.column(0).null_count:
            raise InvalidInputError(
                f"iterator {label} yielded rows without the pool key ({key}): it must not"
                " change key values"
            )

        def at(i: int) -> SortKey:
            return key.sort_key(key.row_key(keys, i))

        first, last = at(0), at(n - 1)
        if self.last_out is not None and first < self.last_out:
            raise self._disorder(first, self.last_out)
        if not sort.in_key_order(keys, key):
            for i in range(1, n):  # rare: find the first row out of order (or a NaN)
                if at(i) < at(i - 1):
                    raise self._disorder(at(i), at(i - 1))
        assert self.first_in is not None and self.last_in is not None
        if first < self.first_in or self.last_in < last:
            given = self.last_in
            beyond = kway.first_true(0, n, lambda i: given < at(i))
            wrong = first if first < self.first_in else at(beyond)
            raise InvalidInputError(
                f"iterator {label} yielded key {_key_text(wrong)}, which it was not given:"
                " it must not change key values"
            )
        self.last_out = last
        return table

    def _disorder(self, this: SortKey, before: SortKey) -> InvalidInputError:
        return InvalidInputError(
            f"iterator {self.user.label} broke the pool key order: it yielded key"
            f" {_key_text(this)} after {_key_text(before)}"
        )
