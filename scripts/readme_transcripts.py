"""Refresh the README's transcripts from a real run of scripts/quickstart.sh.

Usage: python scripts/readme_transcripts.py QUICKSTART_OUTPUT_FILE
The output is split at the "# --- branching ---" and "# --- maintenance ---" lines;
each part replaces the
fenced block between the matching <!-- NAME:begin --> / <!-- NAME:end --> markers.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def main() -> None:
    out = Path(sys.argv[1]).read_text()
    lines = [line for line in out.splitlines() if not line.startswith("setup:")]
    text = "\n".join(lines)
    quick, _, rest = text.partition("# --- branching ---")
    branching, _, maintenance = rest.partition("# --- maintenance ---")
    readme = Path("README.md")
    doc = readme.read_text()
    parts = (("quickstart", quick), ("branching", branching), ("maintenance", maintenance))
    for name, part in parts:
        block = f"<!-- {name}:begin -->\n```console\n{part.strip()}\n```\n<!-- {name}:end -->"
        pattern = re.compile(rf"<!-- {name}:begin -->.*?<!-- {name}:end -->", re.S)
        if not pattern.search(doc):
            sys.exit(f"README.md has no {name} markers")
        doc = pattern.sub(block.replace("\\", "\\\\"), doc)
    readme.write_text(doc)


if __name__ == "__main__":
    main()
