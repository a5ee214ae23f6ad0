#!/usr/bin/env python3
"""One CPU name in the carried numba cache (scripts/nbcache.sh; run in the repository root on the GPU box).

  python3 scripts/nbcache_rekey.py CPU_NAME [DIR ...]      (default DIRs: aligner index)

numba keys each cached function by its signature and by the compiling host's CPU name and feature string.
The GPU boxes come with two CPUs, Sapphire Rapids (the H100 boxes) and Emerald Rapids (the H200 boxes), whose
LLVM feature strings are identical; only the name (the scheduling model) differs. nbcache.sh pins
NUMBA_CPU_NAME to one name on either box, so one cache serves both. This script brings an index to that name:
per signature, an entry under CPU_NAME is kept; otherwise an entry of another name with CPU_NAME's feature
string (read from the cache's CPU_NAME entries, or the host's when it has none) is filed under
CPU_NAME; every other entry and its .nbc file is dropped. Prints what it changed.
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path


def host_features() -> str | None:
    try:
        from numba.core.codegen import get_host_cpu_features
        return get_host_cpu_features()
    except Exception:
        return None


def load(nbi: Path):
    with open(nbi, "rb") as fh:
        version = pickle.load(fh)
        stamp, overloads = pickle.loads(fh.read())
    return version, stamp, overloads


def rekey(nbi: Path, cpu: str, features: str | None) -> tuple[int, int]:
    version, stamp, overloads = load(nbi)
    keep: dict = {}
    for key, name in overloads.items():   # key: (signature, (triple, CPU name, features), code hashes)
        if key[1][1] == cpu:
            keep[key] = name
    moved = 0
    for (sig, magic, *rest), name in overloads.items():
        if magic[1] == cpu or magic[2] != features:
            continue
        key = (sig, (magic[0], cpu, magic[2]), *rest)
        if key not in keep:
            keep[key] = name
            moved += 1
    dropped = [name for k, name in overloads.items() if name not in keep.values()]
    if moved or dropped:
        for name in dropped:
            (nbi.parent / name).unlink(missing_ok=True)
        with open(nbi, "wb") as fh:
            pickle.dump(version, fh, protocol=-1)
            fh.write(pickle.dumps((stamp, keep), protocol=-1))
    return moved, len(dropped)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cpu, dirs = sys.argv[1], sys.argv[2:] or ["aligner", "index"]
    files = [nbi for d in dirs for nbi in sorted(Path(d).rglob("__pycache__/*.nbi"))]
    # CPU_NAME's feature string: from any index's CPU_NAME entry (the box's), else the host's
    feats = next((k[1][2] for nbi in files for k in load(nbi)[2] if k[1][1] == cpu), None) or host_features()
    n_moved = n_dropped = n_files = 0
    for nbi in files:
        m, k = rekey(nbi, cpu, feats)
        n_moved, n_dropped, n_files = n_moved + m, n_dropped + k, n_files + 1
    print(f"numba cache: {n_files} indexes, {n_moved} entries filed under {cpu}, {n_dropped} dropped")


if __name__ == "__main__":
    main()
