"""The `g3align mem` pipeline: index load -> read batches -> batch kernels -> SAM/BAM.

    for batch in read_batches(...):          # struct-of-arrays, bwa's -K chunking
        sam = align_batch_se(batch)          # CPU twin: nogil numba kernel over read ranges
        sink.write(sam)

Ranges of a batch run on `n_threads` Python threads (the kernel releases the GIL); their outputs are
concatenated in read order, so the bytes never depend on -t or -K.
"""
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from g3align.aligner.core import align_range_se
from g3align.aligner.extend import NF
from g3align.aligner.options import score_matrix
from g3align.aligner.pair import pestat, regions_range, sam_pe_range


def _bytes_csr(strings):
    """list[str] -> (uint8 bytes, int64 offsets)."""
    enc = [s.encode() for s in strings]
    off = np.zeros(len(enc) + 1, np.int64)
    if enc:
        np.cumsum([len(e) for e in enc], out=off[1:])
    return np.frombuffer(b"".join(enc), np.uint8).copy() if enc else np.zeros(0, np.uint8), off


class MemAligner:
    """Holds the index and options; aligns ReadBatches to SAM bytes."""

    def __init__(self, ref, fm, opt, rg_id: str = "", copy_comment: bool = False, device: str = "cpu"):
        self.ref = ref
        self.fm = fm
        self.opt = opt
        self.params = opt.to_numba()
        self.mat = score_matrix(opt.a, opt.b)
        self.ctg_names, self.ctg_off = _bytes_csr(ref.names)
        self.offsets = np.ascontiguousarray(ref.offsets, dtype=np.int64)
        self.pac = ref.pac
        self.l_pac = int(ref.l_pac)
        self.rg_id = np.frombuffer(rg_id.encode(), np.uint8).copy()
        self.copy_comment = copy_comment
        self.n_threads = max(1, int(opt.n_threads))
        self._pool = ThreadPoolExecutor(self.n_threads) if self.n_threads > 1 else None
        self.device = device
        self._fm_dev = None
        if device == "gpu":
            from g3align.aligner.smem_gpu import fm_to_device
            self._fm_dev = fm_to_device(fm)

    def _seeds(self, batch, seq_off):
        """Seeding stage: on the GPU (one kernel for the whole batch) or inside the CPU kernels."""
        if self._fm_dev is None:
            e = np.zeros(0, np.int64)
            return e, e, e, e, e
        from g3align.aligner.smem_gpu import collect_intv_batch_gpu
        mb, me, mk, ms, off = collect_intv_batch_gpu(self._fm_dev, batch.seq, seq_off, self.params, to_host=True)
        c = np.ascontiguousarray
        return (c(mb, dtype=np.int64), c(me, dtype=np.int64), c(mk, dtype=np.int64), c(ms, dtype=np.int64),
                c(off, dtype=np.int64))

    def _ranges(self, seq_off, n):
        """Contiguous read ranges with about equal bases, several per thread for balance."""
        parts = min(n, self.n_threads * 8) if self.n_threads > 1 else 1
        if parts <= 1:
            return [(0, n)]
        cuts = np.searchsorted(seq_off, np.linspace(seq_off[0], seq_off[-1], parts + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
        return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))

    def _map(self, fn, ranges):
        if self._pool is None or len(ranges) == 1:
            return [fn(r) for r in ranges]
        return list(self._pool.map(fn, ranges))

    def _read_arrays(self, batch):
        n = batch.n
        names, name_off = _bytes_csr(batch.names)
        if self.copy_comment:
            comments, com_off = _bytes_csr(batch.comments)
        else:
            comments, com_off = np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
        seq_off = np.ascontiguousarray(batch.seq_off - batch.seq_off[0], dtype=np.int64)
        qual = batch.qual if batch.has_qual else np.zeros(0, np.uint8)
        return names, name_off, comments, com_off, seq_off, qual

    def align_batch_pe(self, batch, pes=None, log=None) -> bytes:
        """An interleaved batch (read 2j and 2j+1 are mates; bwa's -K chunk): regions of every read,
        insert-size statistics over the whole batch (unless given with -I), then pairing."""
        n = batch.n
        if n == 0:
            return b""
        names, name_off, comments, com_off, seq_off, qual = self._read_arrays(batch)

        iv = self._seeds(batch, seq_off)

        def stage1(r):
            return regions_range(self.fm, self.offsets, self.l_pac, self.pac, batch.seq, seq_off, r[0], r[1],
                                 self.params, self.mat, *iv)
        ranges = self._ranges(seq_off, n)
        parts = self._map(stage1, ranges)
        R_cat = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, NF), np.int64)
        counts = np.concatenate([p[1] for p in parts])
        reg_off = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=reg_off[1:])
        if pes is None:
            pes = pestat(self.params, self.l_pac, R_cat, reg_off, n // 2, log)
        low, high, failed, avg, std = pes
        pair_off = seq_off[::2].copy()
        pr = self._ranges(pair_off, n // 2) if n >= 2 else [(0, 0)]

        def stage2(r):
            return sam_pe_range(self.fm, self.offsets, self.l_pac, self.pac, self.ctg_names, self.ctg_off,
                                batch.seq, seq_off, qual, batch.has_qual, names, name_off, comments, com_off,
                                self.rg_id, R_cat, reg_off, low, high, failed, avg, std,
                                int(batch.first_id) // 2, r[0], r[1], self.params, self.mat)
        return b"".join(o.tobytes() for o in self._map(stage2, pr))

    def align_batch_se(self, batch) -> bytes:
        n = batch.n
        if n == 0:
            return b""
        names, name_off, comments, com_off, seq_off, qual = self._read_arrays(batch)

        iv = self._seeds(batch, seq_off)

        def run(r):
            return align_range_se(self.fm, self.offsets, self.l_pac, self.pac, self.ctg_names, self.ctg_off,
                                  batch.seq, seq_off, qual, batch.has_qual, names, name_off, comments,
                                  com_off, self.rg_id, int(batch.first_id), r[0], r[1], self.params, self.mat,
                                  *iv)

        return b"".join(o.tobytes() for o in self._map(run, self._ranges(seq_off, n)))


def log(msg: str, verbose: int = 3, level: int = 3):
    if verbose >= level:
        print(msg, file=sys.stderr, flush=True)


def user_pestat(spec: str):
    """bwa's -I FLOAT[,FLOAT[,INT[,INT]]]: mean, std, max, min of the FR insert size."""
    vals = [float(v) for v in spec.replace(":", ",").split(",") if v]
    if not 1 <= len(vals) <= 4:
        raise ValueError(f"-I: expected FLOAT[,FLOAT[,INT[,INT]]], got '{spec}'")
    avg = vals[0]
    std = vals[1] if len(vals) > 1 else avg * .1
    high = int(vals[2] + .499) if len(vals) > 2 else int(avg + 4. * std + .499)
    low = int(vals[3] + .499) if len(vals) > 3 else max(1, int(avg - 4. * std + .499))
    low_a = np.zeros(4, np.int64)
    high_a = np.zeros(4, np.int64)
    failed = np.ones(4, np.int64)
    avg_a = np.zeros(4)
    std_a = np.zeros(4)
    low_a[1], high_a[1], failed[1], avg_a[1], std_a[1] = low, high, 0, avg, std
    return low_a, high_a, failed, avg_a, std_a


def run_mem_pe(aligner: MemAligner, batches, sink, verbose: int = 3, pes=None):
    n_reads = 0
    t0 = time.time()
    for batch in batches:
        t1 = time.time()
        log(f"[M::process] read {batch.n} sequences ({batch.bases} bp)...", verbose)
        sam = aligner.align_batch_pe(batch, pes, log=lambda s: log(s, verbose))
        sink.write_sam_bytes(sam)
        n_reads += batch.n
        log(f"[M::mem_process_seqs] Processed {batch.n} reads in {time.time() - t1:.3f} real sec", verbose)
    return n_reads, time.time() - t0


def run_mem_se(aligner: MemAligner, batches, sink, verbose: int = 3):
    n_reads = 0
    t0 = time.time()
    for batch in batches:
        t1 = time.time()
        sam = aligner.align_batch_se(batch)
        sink.write_sam_bytes(sam)
        n_reads += batch.n
        log(f"[M::mem_process_seqs] Processed {batch.n} reads in {time.time() - t1:.3f} real sec", verbose)
    return n_reads, time.time() - t0
