#!/usr/bin/env python3
"""The numba cache files that belong to the current sources, for scripts/nbcache.sh (run in the repository root).

  find aligner index -path '*__pycache__*' -name '*.nb[ic]' | python3 scripts/nbcache_prune.py

numba names a function's cache files `<module>.<function>-<line>.pyXY.nbi` (and `.N.nbc`), <line> being the
first line of the function's definition (its first decorator). After a function moves or goes away, its old files
stay beside the new ones and the carried cache grows with every call. Prints the files whose name still points at
a decorated `def <function>` in aligner/ or index/, so only those travel.
"""
from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path

NAME = re.compile(r"^(?P<mod>[A-Za-z0-9_]+)\.(?P<func>[A-Za-z0-9_]+)-(?P<line>\d+)\.py\d+\.(?:\d+\.)?nb[ic]$")


@cache
def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def current(f: str) -> bool:
    p = Path(f)
    m = NAME.match(p.name)
    if m is None:
        return True  # not a name this script knows: keep it
    lines = lines_of(p.parent.parent / f"{m['mod']}.py")
    i = int(m["line"]) - 1
    if not 0 <= i < len(lines) or not lines[i].lstrip().startswith("@"):
        return False
    for k in range(i, min(i + 12, len(lines))):  # the decorators, then the def
        s = lines[k].lstrip()
        if s.startswith("def ") or s.startswith("async def "):
            return re.match(rf"(async )?def {m['func']}\(", s) is not None
    return False


def main():
    for f in (ln.strip() for ln in sys.stdin):
        if f and current(f):
            print(f)


if __name__ == "__main__":
    main()
