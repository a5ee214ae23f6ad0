"""G3ALIGN_TUNE='NAME=VALUE,...': the pipeline sizes a benchmark may vary without editing the code.

Each name is a module constant of the pipelines that decides how work is cut, queued and overlapped, never what is
computed: the output is the same for every value (tests/test_mem.py and tests/test_map.py run several). The CLI sets
them once, after its options are parsed and before the reader starts (apply); a name not listed here is an error.
"""
from __future__ import annotations

import importlib
import os

_READS, _MEM, _MAP = "g3align.aligner.io.reads", "g3align.aligner.mem.pipeline", "g3align.aligner.map.pipeline"
TUNABLE = {  # name: (module, what it sets)
    "PART_BASES": (_READS, "bases per part of a paired-end -K batch (parts flow through the stages one by one)"),
    "SE_STAGED_CHUNK": (_READS, "bases per single-end batch on mem's GPU path"),
    "PARSE_THREADS": (_READS, "FASTQ blocks parsed at once"),
    "MAP_PART_BASES": (_READS, "bases per part of a map batch"),
    "MAP_READ_AHEAD": (_READS, "map parts parsed ahead of the mapping"),
    "PE_AHEAD": (_MEM, "paired-end parts whose regions are computed ahead of pairing"),
    "PREP_WORKERS": (_MEM, "paired-end parts prepared at once on the GPU path (seeding, chaining, extension)"),
    "SE_PREP_WORKERS": (_MEM, "single-end batches prepared at once on the GPU path"),
    "RESCUE_GROUP_BASES": (_MEM, "bases of a -K batch whose mate rescue is one GPU launch"),
    "SWITCH_INTERVAL_US": (_MEM, "the GIL's switch interval on mem's GPU path, microseconds (0: Python's 5 ms)"),
    "MAP_DEPTH": (_MAP, "map parts in flight at once"),
    "SCAN_PIECE": ("g3align.index.fasta", "bytes per piece of a reference FASTA scanned on threads"),
    "MAP_QUEUED": (_MAP, "map parts queued for the GPU stages"),
    "MAP_SWITCH_INTERVAL_US": (_MAP, "the GIL's switch interval on map's GPU path, microseconds (0: Python's 5 ms)"),
    "KSW2_AT_ONCE": ("g3align.aligner.map.align_batch", "ksw2 job batches of a map part in flight on the GPU"),
}


class TuneError(ValueError):
    """A G3ALIGN_TUNE entry that names no tunable constant or has a bad value."""


def pairs() -> list[tuple[str, str]]:
    """G3ALIGN_TUNE as (NAME, VALUE) pairs."""
    out = []
    for kv in filter(None, os.environ.get("G3ALIGN_TUNE", "").split(",")):
        k, _, v = kv.partition("=")
        out.append((k.strip(), v.strip()))
    return out


def apply() -> None:
    """Set every constant G3ALIGN_TUNE names (its module imported now); TuneError for an unknown name or value."""
    for k, v in pairs():
        if k not in TUNABLE:
            raise TuneError(f"G3ALIGN_TUNE: no constant {k!r} (tunable: {', '.join(sorted(TUNABLE))})")
        mod = importlib.import_module(TUNABLE[k][0])
        old = getattr(mod, k)
        try:
            setattr(mod, k, type(old)(v))
        except ValueError:
            raise TuneError(f"G3ALIGN_TUNE: {k}={v!r} is not a {type(old).__name__}") from None
