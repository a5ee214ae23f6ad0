"""Batch minimizer extraction on the GPU (kernels/mmsketch.cu) and its CPU twin (numba).

Input: a batch of reads as struct-of-arrays (ReadBatch-like: ``seq`` uint8 codes 0..4 concatenated,
``seq_off`` int64[n+1]), the minimizer parameters ``w``, ``k``, ``is_hpc`` of the index.
Output, per batch, CSR form: ``(mz, off)`` with ``mz`` (N, 2) uint64 and ``off`` int64[n+1]; read r's
minimizers are ``mz[off[r]:off[r+1]]``, exactly ``aligner.mmseed.collect_minimizers`` of that read as a
single segment (rid 0): ``x = hash64(k-mer) << 8 | span``, ``y = pos << 1 | strand`` (minimap2's
mm_sketch; CPU reference ``index.mmidx.sketch_into``).

* :func:`sketch_batch_gpu` — kernels/mmsketch.cu, one thread per read (longest reads first), slots of
  ``2*len/(w+1)+16`` records, exclusive scan of the counts, warp-per-read compaction; reads that
  overflow their slot are re-run straight into the CSR (no read lost).
* :func:`sketch_batch_cpu` — the same two passes with a numba ``prange`` over reads calling
  ``sketch_into``.

Both return the same arrays byte for byte (tests/test_mmsketch_gpu.py). Not yet used by ``g3align map``.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from g3align.index.mmidx import check_wk, sketch_into
from g3align.jit import njit

__all__ = ["slot_caps", "sketch_batch_cpu", "sketch_batch_gpu"]

_BLOCK = 128



def slot_caps(seq_off, w: int, cap: int | None = None) -> np.ndarray:
    """Per-read slot size of pass 1: 2*len/(w+1)+16 (0 for an empty read), at most ``cap`` when given."""
    lens = np.diff(np.asarray(seq_off, np.int64))
    c = np.where(lens > 0, lens * 2 // (w + 1) + 16, 0)
    if cap is not None:
        c = np.minimum(c, int(cap))
    return c.astype(np.int64)


def _exclusive(c):
    off = np.zeros(c.shape[0] + 1, np.int64)
    np.cumsum(c, out=off[1:])
    return off


# ------------------------------------------------------------------------------------------------
# CPU twin
# ------------------------------------------------------------------------------------------------

@njit(cache=True, parallel=True)
def _sketch_slots(seq, seq_off, w, k, is_hpc, cap, base, slot, count):
    for r in nb.prange(seq_off.shape[0] - 1):
        buf = np.empty((cap[r], 2), np.uint64)
        buf, m = sketch_into(seq, seq_off[r], seq_off[r + 1], w, k, 0, is_hpc, buf, 0)
        count[r] = m
        if m <= cap[r]:
            b = base[r]
            for j in range(m):
                slot[b + j, 0] = buf[j, 0]
                slot[b + j, 1] = buf[j, 1]


@njit(cache=True, parallel=True)
def _compact(seq, seq_off, w, k, is_hpc, cap, base, slot, count, off, out):
    for r in nb.prange(seq_off.shape[0] - 1):
        m = count[r]
        o = off[r]
        if m <= cap[r]:
            b = base[r]
            for j in range(m):
                out[o + j, 0] = slot[b + j, 0]
                out[o + j, 1] = slot[b + j, 1]
        else:  # slot overflow: sketch again, straight into the CSR
            buf = np.empty((m, 2), np.uint64)
            buf, m = sketch_into(seq, seq_off[r], seq_off[r + 1], w, k, 0, is_hpc, buf, 0)
            for j in range(m):
                out[o + j, 0] = buf[j, 0]
                out[o + j, 1] = buf[j, 1]


def sketch_batch_cpu(seq, seq_off, w: int, k: int, is_hpc: bool, cap: int | None = None):
    """Minimizers of every read (CSR): ``(mz (N, 2) uint64, off int64[n+1])``; numba threads over reads.

    ``cap`` (tests) bounds the pass-1 slots to force the overflow path.
    """
    check_wk(w, k)
    seq = np.ascontiguousarray(seq, np.uint8)
    seq_off = np.ascontiguousarray(seq_off, np.int64)
    n = seq_off.shape[0] - 1
    caps = slot_caps(seq_off, w, cap)
    base = _exclusive(caps)
    slot = np.empty((int(base[-1]), 2), np.uint64)
    count = np.zeros(n, np.int64)
    if n:
        _sketch_slots(seq, seq_off, w, k, bool(is_hpc), caps, base, slot, count)
    off = _exclusive(count)
    out = np.empty((int(off[-1]), 2), np.uint64)
    if n:
        _compact(seq, seq_off, w, k, bool(is_hpc), caps, base, slot, count, off, out)
    return out, off


# ------------------------------------------------------------------------------------------------
# GPU
# ------------------------------------------------------------------------------------------------

def _module(w, k, is_hpc):
    from g3align.kernels.loader import get_module

    return get_module("mmsketch", {"MM_K": int(k), "MM_W": int(w), "MM_HPC": int(bool(is_hpc))})


def _device_seq(cp, seq):
    """uint8 codes on the device, 8-byte aligned and padded to a multiple of 8 bytes (word loads)."""
    if isinstance(seq, cp.ndarray) and seq.dtype == cp.uint8 and seq.flags.c_contiguous \
            and seq.data.ptr % 8 == 0 and seq.size % 8 == 0:
        return seq
    n = int(seq.size)
    d = cp.zeros(max((n + 7) // 8 * 8, 8), cp.uint8)
    if isinstance(seq, cp.ndarray):
        d[:n] = cp.asarray(seq, cp.uint8).ravel()
    else:  # host codes through pinned staging buffers (a pageable copy runs at a fraction of the bus speed)
        from g3align.aligner.gpu.pinned import put
        d[:n] = put(np.ascontiguousarray(seq, np.uint8).ravel())
    return d


def sketch_batch_gpu(seq, seq_off, w: int, k: int, is_hpc: bool, cap: int | None = None, to_host: bool = True,
                     sort_by_length: bool = True, timings: dict | None = None):
    """:func:`sketch_batch_cpu` on the current GPU. ``seq``/``seq_off`` host or CuPy arrays.

    Returns ``(mz, off)`` as NumPy arrays (``to_host``) or CuPy arrays. ``timings`` (optional dict)
    receives the device time of the kernels in ms under ``"kernels_ms"`` (pass 1, scan, compaction,
    overflow re-runs).
    """
    import cupy as cp

    from g3align.aligner import trace_mark
    from g3align.aligner.gpu.pinned import drain

    trace_mark(None)
    check_wk(w, k)
    mod = _module(w, k, is_hpc)
    f_sketch = mod.get_function("mm_sketch")
    f_compact = mod.get_function("mm_compact")
    seq_d = _device_seq(cp, seq)
    # the per-read arithmetic (slot sizes, offsets, the length order, the overflowing reads) on the host: the
    # arrays are one number per read, and CuPy's elementwise, scan and nonzero kernels are compiled with NVRTC
    # at their first call on a machine (5.4 thread-s of NVRTC in a fresh H100 box's first chr20 run, py-spy)
    off_h = np.ascontiguousarray(cp.asnumpy(seq_off) if isinstance(seq_off, cp.ndarray) else seq_off, np.int64)
    n = int(off_h.shape[0]) - 1
    if n <= 0:
        mz, off = np.empty((0, 2), np.uint64), np.zeros(max(n + 1, 1), np.int64)
        return (mz, off) if to_host else (cp.asarray(mz), cp.asarray(off))
    caps_h = slot_caps(off_h, w, cap)
    base_h = _exclusive(caps_h)
    n_slot = int(base_h[-1])
    # one upload: read offsets, slot bases, slot sizes and the reads longest first (the order threads take
    # them; it spreads the long reads over the launch and does not change the output)
    order = np.argsort(-np.diff(off_h), kind="stable") if sort_by_length else np.zeros(0, np.int64)
    packed = cp.asarray(np.concatenate([off_h, base_h, caps_h, order.astype(np.int64)]))
    off_in, base, caps = packed[:n + 1], packed[n + 1:2 * n + 2], packed[2 * n + 2:3 * n + 2]
    reads = packed[3 * n + 2:] if sort_by_length else None
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    ev0.record()
    slot = cp.empty((max(n_slot, 1), 2), cp.uint64)
    count = cp.empty(n, cp.int64)
    grid = ((n + _BLOCK - 1) // _BLOCK,)
    trace_mark("sketch: inputs")
    f_sketch(grid, (_BLOCK,), (seq_d, off_in, reads if reads is not None else np.uint64(0), np.int64(n), base,
                               caps, slot, count))
    drain()  # (a stream synchronize, not a blocking copy, waits for the kernel)
    count_h = cp.asnumpy(count)
    trace_mark("sketch: kernel, counts to the host")
    off_h2 = _exclusive(count_h)
    total = int(off_h2[-1])
    off = cp.asarray(off_h2)
    out = cp.empty((max(total, 1), 2), cp.uint64)
    f_compact(((n * 32 + 255) // 256,), (256,), (slot, base, caps, count, off, np.int64(n), out))
    over_h = np.flatnonzero(count_h > caps_h).astype(np.int64)
    n_over = int(over_h.size)
    if n_over:
        over = cp.asarray(over_h)
        f_sketch(((n_over + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                 (seq_d, off_in, over, np.int64(n_over), off, count, out, np.uint64(0)))
    ev1.record()
    ev1.synchronize()
    trace_mark("sketch: compaction, overflow")
    if timings is not None:
        timings["kernels_ms"] = cp.cuda.get_elapsed_time(ev0, ev1)
        timings["overflow_reads"] = n_over
    del slot
    out = out[:total]
    if to_host:
        return cp.asnumpy(out), cp.asnumpy(off)
    return out, off


# ------------------------------------------------------------------------------------------------
# benchmark (device box): python3 -m g3align.aligner.map.gpu.sketch --reads 200000 --len 10000 --out DIR
# ------------------------------------------------------------------------------------------------

@njit(cache=True, parallel=True)
def _sim(n, length, seed, out):
    """Random codes with ~0.1 % N and a homopolymer stretch now and then (deterministic per read)."""
    for r in nb.prange(n):
        np.random.seed(seed + r)
        o = r * length
        i = 0
        while i < length:
            u = np.random.random()
            c = np.random.randint(0, 4)
            run = 1
            if u < 0.001:
                c = 4
            elif u < 0.03:
                run = np.random.randint(2, 12)
            for _ in range(run):
                if i < length:
                    out[o + i] = c
                    i += 1


def _bench(argv=None):
    import argparse
    import os
    import time

    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=200000)
    ap.add_argument("--len", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu-reps", type=int, default=1)
    ap.add_argument("--presets", default="map-ont,map-pb,map-hifi")
    ap.add_argument("--out", default=".")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    seq = np.empty(a.reads * a.len, np.uint8)
    _sim(a.reads, a.len, 12345, seq)
    seq_off = np.arange(a.reads + 1, dtype=np.int64) * a.len
    t_sim = time.perf_counter() - t0
    bases = int(seq_off[-1])
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows = [f"# mmsketch bench: {a.reads} reads x {a.len} bp = {bases / 1e9:.2f} Gbases on {dev}, "
            f"CPU twin numba threads {nb.get_num_threads()} (os.cpu_count {os.cpu_count()}), sim {t_sim:.1f} s",
            "| preset | k/w/hpc | minimizers | CPU twin s | CPU Gbases/s | GPU device ms | GPU Gbases/s | "
            "GPU end-to-end s (H2D+D2H) | kernel speed-up | identical |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    seq_d = _device_seq(cp, seq)
    off_d = cp.asarray(seq_off)
    for preset in a.presets.split(","):
        try:
            rows.append(_bench_one(a, preset, seq, seq_off, seq_d, off_d, bases))
        except Exception as e:  # keep the other presets' rows
            rows.append(f"| {preset} | failed: {type(e).__name__}: {e} |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "mmsketch_bench.md"), "w") as fh:
        fh.write(text)


def _bench_one(a, preset, seq, seq_off, seq_d, off_d, bases):
    import time

    from g3align.aligner.map.seed import seed_params

    p = seed_params(preset)
    w, k, hpc = p["w"], p["k"], p["is_hpc"]
    sketch_batch_cpu(seq[:100 * a.len], seq_off[:101], w, k, hpc)  # compile/warm
    sketch_batch_gpu(seq[:800], np.array([0, 800], np.int64), w, k, hpc)
    tc = []
    for _ in range(a.cpu_reps):
        t = time.perf_counter()
        mz_c, off_c = sketch_batch_cpu(seq, seq_off, w, k, hpc)
        tc.append(time.perf_counter() - t)
    tg = []
    for _ in range(a.reps):
        tm = {}
        mz_g, off_g = sketch_batch_gpu(seq_d, off_d, w, k, hpc, to_host=False, timings=tm)
        tg.append(tm["kernels_ms"])
        del mz_g, off_g
    t = time.perf_counter()
    mz_h, off_h = sketch_batch_gpu(seq, seq_off, w, k, hpc, to_host=True)
    te = time.perf_counter() - t
    same = np.array_equal(off_h, off_c) and np.array_equal(mz_h, mz_c)
    c, g = min(tc), min(tg)
    return (f"| {preset} | {k}/{w}/{int(hpc)} | {mz_c.shape[0]} | {c:.3f} | {bases / c / 1e9:.3f} | {g:.1f} | "
            f"{bases / g / 1e6:.1f} | {te:.3f} | {c * 1e3 / g:.1f}x | {same} |")


if __name__ == "__main__":
    _bench()
