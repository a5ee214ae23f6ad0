#!/usr/bin/env python3
"""Which source files' numba cache entries are still valid, for scripts/nbcache.sh.

  python3 scripts/nbcache_keep.py STAMPS   (run in the repository root)

STAMPS lines: `sha1 size mtime path` of every aligner/ and index/ source when the cache was written. numba keys a
cached function by its own file's mtime and size only, but the cached machine code of a function also holds every
jitted function it calls from other files, compiled in. A file whose content is unchanged may therefore get its
old mtime back (so numba takes its cache) only if no file it imports, directly or through other g3align modules,
changed or is new: otherwise its cache would run the old code of the changed callee. A changed file without numba
(no jitted function of its own, so none compiled into another file's code) stales only itself: a file that imports it
keeps its cache unless a changed numba file lies behind it (mmext.py, pinned.py: edits there cost no recompiling of
mmpipeline.py). Prints `mtime path` for each file whose old mtime may be restored.
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


def has_numba(path: str) -> bool:
    """Whether `path` imports numba (only such a file can hold jitted functions)."""
    for node in ast.walk(ast.parse(Path(path).read_text(), path)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "numba" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "numba":
            return True
    return False


def keep(stamps: list[tuple[str, str, str, str]]) -> list[tuple[str, str]]:
    files = sorted(str(p) for pkg in PKGS for p in Path(pkg).glob("*.py"))
    old = {path: (sha, mt) for sha, _size, mt, path in stamps}
    changed = {f for f in files if f not in old or hashlib.sha1(Path(f).read_bytes()).hexdigest() != old[f][0]}
    deps = {f: imports_of(f) for f in files}
    # files from which a changed numba file can be reached through imports (its own file included): their cached
    # code may hold its old jitted functions
    reach = {f for f in changed if has_numba(f)}
    grew = True
    while grew:  # everything that imports such a file, transitively (through files without numba too)
        grew = False
        for f in files:
            if f not in reach and deps[f] & reach:
                reach.add(f)
                grew = True
    stale = changed | reach
    return [(old[f][1], f) for f in files if f not in stale and f in old]


def main(argv: list[str]) -> int:
    stamps = [tuple(ln.split(" ", 3)) for ln in Path(argv[1]).read_text().splitlines() if ln.strip()]
    for mt, f in keep(stamps):
        print(mt, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
