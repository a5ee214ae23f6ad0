#!/usr/bin/env python3
"""Which source files' numba cache entries are still valid, for scripts/nbcache.sh.

  python3 scripts/nbcache_keep.py STAMPS   (run in the repository root)

STAMPS lines: `sha1 size mtime path` of every aligner/ and index/ source when the cache was written. numba keys a
cached function by its own file's mtime and size only, but the cached machine code of a function also holds every
jitted function it calls from other files, compiled in. A file whose content is unchanged may therefore get its
old mtime back (so numba takes its cache) only if no file it imports, directly or through other g3align modules,
changed or is new: otherwise its cache would run the old code of the changed callee. Prints `mtime path` for each
file whose old mtime may be restored.
"""
from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path

PKGS = ("aligner", "index")


def module_file(name: str) -> str | None:
    """'g3align.aligner.samout' -> 'aligner/samout.py' when that file exists."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[0] == "g3align" and parts[1] in PKGS:
        p = f"{parts[1]}/{parts[2]}.py"
        return p if Path(p).exists() else None
    return None


def imports_of(path: str) -> set[str]:
    """The aligner/ and index/ files that `path` imports anywhere (module level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(Path(path).read_text(), path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        out.update(f for f in map(module_file, names) if f is not None and f != path)
    return out


def keep(stamps: list[tuple[str, str, str, str]]) -> list[tuple[str, str]]:
    files = sorted(str(p) for pkg in PKGS for p in Path(pkg).glob("*.py"))
    old = {path: (sha, mt) for sha, _size, mt, path in stamps}
    changed = {f for f in files if f not in old or hashlib.sha1(Path(f).read_bytes()).hexdigest() != old[f][0]}
    deps = {f: imports_of(f) for f in files}
    stale = set(changed)
    grew = True
    while grew:  # everything that imports a stale file, transitively
        grew = False
        for f in files:
            if f not in stale and deps[f] & stale:
                stale.add(f)
                grew = True
    return [(old[f][1], f) for f in files if f not in stale and f in old]


def main(argv: list[str]) -> int:
    stamps = [tuple(ln.split(" ", 3)) for ln in Path(argv[1]).read_text().splitlines() if ln.strip()]
    for mt, f in keep(stamps):
        print(mt, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
