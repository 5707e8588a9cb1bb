"""Where the lake is, and the defaults a user sets once instead of passing each time.

The lake location: ``--lake``, then ``LIMNO_LAKE``, then ``~/.local/share/limno``
(:func:`lake_location`, what the Python API uses). The CLI also reads defaults from
TOML config files (:class:`Settings`): the user's
(``$XDG_CONFIG_HOME/limno/config.toml``, default ``~/.config/limno``) and the lake's
own (``<lake>/config.toml``, local lakes only). A setting comes from the first of: the
command's flag, the environment variable, the lake's file, the user's file: the lake's
file is the more specific one (like a git repository's config over the global one),
and it cannot name the lake (it is read once the lake is known).

Reading a config file imports only :mod:`tomllib` (and only when a file exists), so
``limno --help``, ``ls`` and ``log`` stay fast.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from limno.errors import InvalidInputError

__all__ = [
    "DEFAULT_LAKE",
    "ENGINES",
    "ENV",
    "KEYS",
    "OUTPUT_FORMATS",
    "Settings",
    "check_setting",
    "configured_lake",
    "lake_config_path",
    "lake_location",
    "read_config",
    "user_config_path",
    "write_config",
]

DEFAULT_LAKE = "~/.local/share/limno"
OUTPUT_FORMATS = ("table", "ndjson", "json", "csv", "parquet", "arrow")
ENGINES = ("local", "spark", "auto")
#: the keys of a config file (``spark.conf.NAME`` for any Spark setting NAME), what
#: each means
KEYS = {
    "lake": "lake location (user config only)",
    "format": f"output format: {'|'.join(OUTPUT_FORMATS)}",
    "engine": f"engine of load and query: {'|'.join(ENGINES)}",
    "spark.master": "Spark master URL of new sessions and 'limno spark start'",
    "spark.conf.NAME": "a Spark setting NAME of new sessions and 'limno spark start'",
    "kafka.bootstrap": "the Kafka broker(s) of 'limno kafka', HOST:PORT[,...]",
}
#: the environment variable of each key (``spark.conf.*``: the pairs of LIMNO_SPARK_CONF)
ENV = {
    "lake": "LIMNO_LAKE",
    "format": "LIMNO_FORMAT",
    "engine": "LIMNO_ENGINE",
    "spark.master": "LIMNO_SPARK_MASTER",
    "kafka.bootstrap": "LIMNO_KAFKA_BOOTSTRAP",
}
SPARK_CONF = "spark.conf."


def lake_location(explicit: str | None = None) -> str:
    """The lake location to use, by SPEC precedence (flag, environment, default)."""
    if explicit:
        return explicit
    env = os.environ.get("LIMNO_LAKE")
    if env:
        return env
    return os.path.expanduser(DEFAULT_LAKE)


def configured_lake(explicit: str | None = None) -> str:
    """The CLI's lake: flag, environment, the user's config file, default."""
    if explicit or os.environ.get("LIMNO_LAKE"):
        return lake_location(explicit)
    return read_config(user_config_path()).get("lake") or lake_location()


def user_config_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "limno", "config.toml")


def lake_config_path(location: str) -> str | None:
    """``<lake>/config.toml`` of a local lake; None for a lake in S3 or behind a server."""
    if location.startswith("file://"):
        location = location[len("file://") :]
    elif "://" in location:
        return None
    return os.path.join(os.path.expanduser(location), "config.toml")


def check_setting(key: str, value: Any, where: str = "") -> str:
    """``value`` of ``key`` as the string it is, or InvalidInputError naming the key."""
    at = f"{where}: " if where else ""
    if key.startswith(SPARK_CONF) and len(key) > len(SPARK_CONF):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float | str):
            return str(value)
        raise InvalidInputError(f"{at}{key} must be a string or a number")
    if key not in KEYS:
        known = ", ".join(KEYS)
        raise InvalidInputError(f"{at}unknown config key {key!r} (known: {known})")
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{at}{key} must be a non-empty string")
    choices = {"format": OUTPUT_FORMATS, "engine": ENGINES}.get(key)
    if choices and value not in choices:
        raise InvalidInputError(f"{at}{key} must be one of {', '.join(choices)}, not {value!r}")
    return value


def read_config(path: str | None) -> dict[str, str]:
    """The settings of the config file at ``path`` by dotted key (empty if it is absent)."""
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InvalidInputError(f"cannot read config file {path}: {e.strerror}") from None
    import tomllib  # only when there is a file

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InvalidInputError(f"config file {path}: {e}") from None
    out: dict[str, str] = {}
    _flatten(doc, "", out, path)
    return out


def _flatten(doc: Mapping[str, Any], prefix: str, out: dict[str, str], path: str) -> None:
    for name, value in doc.items():
        key = prefix + name
        if isinstance(value, dict) and not key.startswith(SPARK_CONF):
            _flatten(value, key + ".", out, path)
        else:
            out[key] = check_setting(key, value, f"config file {path}")


def write_config(path: str, settings: Mapping[str, str]) -> None:
    """Write ``settings`` as the TOML file at ``path``: a temporary file, then a rename
    (a reader sees the old file or the new one, never half of one)."""
    import json  # TOML's basic strings take JSON's escapes
    import tempfile

    def q(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    top = [f"{k} = {q(v)}" for k, v in sorted(settings.items()) if "." not in k]
    lines = ["# limno settings (limno config set KEY VALUE)", *top]
    sections: dict[str, list[str]] = {}  # [kafka] bootstrap, [spark] master...
    for k, v in sorted(settings.items()):
        if "." in k and not k.startswith(SPARK_CONF):
            section, _, name = k.rpartition(".")
            sections.setdefault(section, []).append(f"{name} = {q(v)}")
    for section, pairs in sections.items():
        lines += ["", f"[{section}]", *pairs]
    conf = sorted(
        (k[len(SPARK_CONF) :], v) for k, v in settings.items() if k.startswith(SPARK_CONF)
    )
    if conf:
        lines += ["", "[spark.conf]", *(f"{q(k)} = {q(v)}" for k, v in conf)]
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".config-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _env_spark_conf() -> dict[str, str]:
    """The pairs of ``LIMNO_SPARK_CONF`` (``k=v`` separated by ``;`` or newlines)."""
    out = {}
    for part in os.environ.get("LIMNO_SPARK_CONF", "").replace("\n", ";").split(";"):
        k, sep, v = part.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


@dataclass
class Settings:
    """The CLI's defaults for a lake location: environment, lake's file, user's file.

    The files are read on first use.
    """

    location: str | None = None
    _files: list[tuple[str, dict[str, str]]] | None = field(default=None, repr=False)

    def files(self) -> list[tuple[str, dict[str, str]]]:
        """``(path, settings)`` of the files that apply, the one that wins first."""
        if self._files is None:
            found: list[tuple[str, dict[str, str]]] = []
            lake_file = lake_config_path(self.location) if self.location else None
            if lake_file is not None:
                settings = read_config(lake_file)
                if "lake" in settings:
                    raise InvalidInputError(
                        f"config file {lake_file}: 'lake' belongs in the user's config"
                    )
                found.append((lake_file, settings))
            user_file = user_config_path()
            found.append((user_file, read_config(user_file)))
            self._files = found
        return self._files

    def origin(self, key: str) -> tuple[str, str] | None:
        """``(value, where it comes from)`` of ``key``, or None when nothing sets it."""
        if key.startswith(SPARK_CONF):
            env = _env_spark_conf().get(key[len(SPARK_CONF) :])
            if env is not None:
                return env, "environment LIMNO_SPARK_CONF"
        elif key in ENV and os.environ.get(ENV[key]):
            where = f"environment {ENV[key]}"
            return check_setting(key, os.environ[ENV[key]], where), where
        for path, settings in self.files():
            if key in settings:
                return settings[key], path
        return None

    def get(self, key: str) -> str | None:
        found = self.origin(key)
        return found[0] if found else None

    def all(self) -> dict[str, tuple[str, str]]:
        """Every key something sets: ``{key: (value, origin)}``."""
        keys = {k for _, s in self.files() for k in s}
        keys |= {k for k, var in ENV.items() if os.environ.get(var)}
        keys |= {SPARK_CONF + k for k in _env_spark_conf()}
        out = {}
        for key in sorted(keys):
            found = self.origin(key)
            if found:
                out[key] = found
        return out

    def spark_conf(self) -> dict[str, str]:
        """Every ``spark.conf.NAME`` setting, by NAME, by precedence."""
        return {
            k[len(SPARK_CONF) :]: v for k, (v, _) in self.all().items() if k.startswith(SPARK_CONF)
        }
