"""Per-user CLI state: the working ``pool@branch`` set by ``limno use``, per lake.

Kept in ``$XDG_CONFIG_HOME/limno/state.json`` (default ``~/.config/limno``),
written atomically (temp file + rename).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["set_working_ref", "working_ref"]


def _path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "limno", "state.json")


def _load() -> dict[str, Any]:
    try:
        with open(_path(), encoding="utf-8") as f:
            doc = json.load(f)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def working_ref(lake_uri: str) -> str | None:
    value = _load().get("use", {}).get(lake_uri)
    return str(value) if value else None


def set_working_ref(lake_uri: str, ref: str) -> None:
    import tempfile  # 'limno use' only

    doc = _load()
    doc.setdefault("use", {})[lake_uri] = ref
    path = _path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".state-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)
