"""``g3align index``: FASTA -> packed reference -> FM-index -> ``PREFIX.g3i``."""

from __future__ import annotations

import os
import sys
import time

from g3align.index.fasta import read_fasta
from g3align.index.fm import build_fm, check_rows
from g3align.index.store import save_index

__all__ = ["build_index"]


def _log(msg: str) -> None:
    sys.stderr.write(f"[M::index] {msg}\n")
    sys.stderr.flush()


class _Progress:
    """tqdm bars for build_fm's stages, only when stderr is a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.bar = None
        self.stage = None

    def __call__(self, stage, done, total):
        if not self.enabled or stage != "occ":
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="[M::index] occ table", unit="blk", file=sys.stderr,
                            leave=False, mininterval=0.5)
        self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def build_index(fasta_path, prefix=None, sa_intv: int = 8, progress: bool = True,
                bwa_files: bool = False, device: str = "cpu", algo: str = "auto", block=None) -> str:
    """Build the g3align index of ``fasta_path`` into ``PREFIX.g3i`` (default prefix: the FASTA path); with
    ``bwa_files`` also bwa's PREFIX.{pac,ann,amb,bwt,sa}, byte for byte as `bwa index` writes them (bwafmt.py).
    ``device``: "cpu" (divsufsort) or "gpu" (index/sufsort.py's bucket sort); the files are the same bytes.
    ``algo`` (CPU): "is" (divsufsort: the whole suffix array in memory), "bwtsw" (index/bwtsw.py: block by block,
    ``block`` suffixes a block at most, in bounded memory; not with ``bwa_files``) or "auto" (bwtsw when divsufsort's
    build would not fit in this machine's memory); the same bytes.

    Returns the index file path. Raises ``FastaFormatError`` (a ValueError) for unusable FASTA input.
    """
    fasta_path = os.fspath(fasta_path)
    prefix = fasta_path if prefix is None else os.fspath(prefix)
    t_all = time.perf_counter()

    t = time.perf_counter()
    ref = read_fasta(fasta_path)
    n_amb = int(ref.hole_len.sum()) if ref.hole_len.size else 0
    _log(f"read {len(ref.names)} sequence(s), {ref.l_pac} bp, {ref.hole_off.size} ambiguity hole(s) "
         f"({n_amb} bp) from {fasta_path} in {time.perf_counter() - t:.2f} s")

    if algo not in ("auto", "is", "bwtsw"):
        raise ValueError(f"unknown index algorithm '{algo}' (auto, is or bwtsw)")
    if device == "cpu" and algo == "auto":   # block by block where divsufsort's would not fit and that needs less
        have, need = _mem_total(), memory_needed(ref.l_pac, "cpu")
        algo = "bwtsw" if (have and need > have and not bwa_files
                           and _blockwise_needed(ref.l_pac, block) < need) else "is"
    check_memory(ref.l_pac, device, algo, block)
    if device == "cpu" and algo == "bwtsw":
        _log(f"building the BWT block by block (-a bwtsw, up to {_block(block)} suffixes a block)")

    stage_t = {}
    bar = _Progress(progress)

    def prog(stage, done, total):
        if done == 0 and stage not in stage_t:
            stage_t[stage] = time.perf_counter()
        bar(stage, done, total)
        if done == total and stage in stage_t:
            if stage == "occ":
                bar.close()
            name = _STAGE_NAMES.get(stage, stage)
            if stage == "sa" and device == "gpu":
                name = "suffix sorting (GPU buckets)"
            _log(f"{name} done in {time.perf_counter() - stage_t.pop(stage):.2f} s")

    def bwa_index_files(rows):
        from g3align.index.bwafmt import write_bwa_rows
        t = time.perf_counter()
        write_bwa_rows(prefix, ref, rows)
        _log(f"wrote bwa's index files {prefix}.{{pac,ann,amb,bwt,sa}} in {time.perf_counter() - t:.2f} s")

    t = time.perf_counter()
    stats = []
    try:
        fm = build_fm(ref.pac, sa_intv=sa_intv, progress=prog, with_rows=bwa_index_files if bwa_files else None,
                      device=device, stats=stats, algo="bwtsw" if device == "cpu" and algo == "bwtsw" else "is",
                      block=block, tmp_dir=os.path.dirname(os.path.abspath(prefix)), log=_log)
    finally:
        bar.close()
    if stats:
        _, nchunks, most, t_chunks = stats[0]
        _, rounds, t_double = stats[1]
        _log(f"suffixes sorted on the GPU: {nchunks} chunk(s) of up to {most} by their first 29 bases in "
             f"{t_chunks:.2f} s, then {len(rounds)} doubling round(s) over {rounds[0][0] if rounds else 0} suffixes "
             f"in repeats in {t_double:.2f} s")
    _log(f"FM-index of {fm.n} bp (both strands) built in {time.perf_counter() - t:.2f} s "
         f"(sa_intv={sa_intv}, primary={fm.primary})")

    t = time.perf_counter()
    path = save_index(prefix, ref, fm)
    size = os.path.getsize(path)
    _log(f"wrote {path} ({size / 1e6:.1f} MB) in {time.perf_counter() - t:.2f} s")
    _log(f"index built in {time.perf_counter() - t_all:.2f} s")
    return path


def memory_needed(l_pac: int, device: str) -> int:
    """Host bytes the FM-index build of l_pac bases needs at least (n = 2 * l_pac rows): on the CPU the text, the
    whole suffix array (4 bytes a row, 8 from 2**31 rows) and the occurrence table (1.5 bytes a row); on the GPU the
    reference, the rows' codes, the SA samples and the table (a 3.13 Gbp reference peaked at 7.7 bytes a row with a
    table of 2.5 bytes a row)."""
    n = 2 * int(l_pac)
    occ = 1.5
    if device == "gpu":
        return int(n * (0.5 + 1 + 1 + occ))
    return int(n * (1 + (8 if n >= (1 << 31) else 4) + occ))


def _mem_total() -> int:
    """Physical memory (bytes; 0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _size(b: float) -> str:
    return f"{b / 1e9:.1f} GB" if b >= 1e8 else f"{b / 1e6:.1f} MB"


def _block(block) -> int:
    """The blockwise build's block size (its default when None)."""
    from g3align.index.bwtsw import BLOCK
    return int(block or BLOCK)


def _blockwise_needed(l_pac: int, block) -> int:
    from g3align.index.bwtsw import memory_needed as blockwise_needed
    return blockwise_needed(l_pac, _block(block))


def check_memory(l_pac: int, device: str, algo: str = "is", block=None) -> None:
    """A one-line ValueError, before the build, when the reference is beyond the FM-index's limit or this machine's
    memory is below what the build needs at least."""
    check_rows(2 * int(l_pac))
    need = _blockwise_needed(l_pac, block) if device == "cpu" and algo == "bwtsw" else memory_needed(l_pac, device)
    have = _mem_total()
    if have and need > have:
        hint = "" if device == "gpu" else f"; on a GPU (--device gpu) it needs {_size(memory_needed(l_pac, 'gpu'))}"
        if device == "cpu" and algo != "bwtsw":
            bw = _blockwise_needed(l_pac, block)
            if bw < need:
                hint += f", block by block (-a bwtsw) {_size(bw)}"
        raise ValueError(f"indexing {l_pac} bp on the {device.upper()} needs at least {_size(need)} of memory, "
                         f"this machine has {_size(have)}{hint}")


_STAGE_NAMES = {
    "text": "text construction",
    "sa": "suffix array",
    "occ": "occurrence table",
    "sample": "SA sampling",
}
