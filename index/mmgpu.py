"""The minimizer index built on the GPU (``build_mm_index(..., device="gpu")``): the same four arrays as the CPU
build (index/mmidx.py), byte for byte.

1. **Sketch** (kernels/mmsketch.cu ``mm_ref_pieces``): the contigs are cut into pieces of ``PIECE`` bases, one
   thread each. A piece first runs the sketch over the ``WARM`` bases before it without emitting, which rebuilds
   the sketch's state at its start, then sketches its own bases into a slot of its own. Its state at the start
   (S0) and at the end (S1) come back to the host in the CPU's layout, and ``mmidx.redo_pieces`` sketches again,
   on the CPU, every piece whose start state differs from the end state of the piece before it or whose slot
   overflowed, exactly as the CPU build does with its larger pieces. The kept slots are compacted on the GPU
   (``mm_compact``) and the redone pieces copied in, so the minimizers are the sequential sketch's.
2. **Group**: the index's order is (bucket, hash, position) with bucket = ``h & (2^b - 1)`` of the hash h:
   the minimizers are sorted by position and then, stably, by the key ``bucket << (2k - b) | h >> b`` (CuPy's
   argsort is a stable radix sort), the first of each run of equal keys starts a key, and each bucket's keys
   are counted.
Twins: ``mmidx._sketch_pieces`` / ``redo_pieces`` and ``mmidx._group``. Where the GPU has too little free memory
for a reference (``need``), ``build`` returns None and the caller builds on the CPU.
"""
from __future__ import annotations

import numpy as np

from g3align.index import mmidx

__all__ = ["PIECE", "WARM", "build", "build_on", "need"]

PIECE = 1 << 15  # bases a thread sketches (the CPU's pieces: mmidx.SKETCH_PIECE)
WARM = 1024      # bases of warm-up before a piece (a piece whose state still differs is sketched again)
_BLOCK = 128


def need(n_bases: int, w: int) -> int:
    """GPU bytes the build takes at most for n_bases: the codes, the slots (2.5 minimizers a window, 16 bytes
    each), the minimizers, and the sort's keys, positions, indices and CuPy's temporary storage."""
    n_mz = 2 * n_bases // (w + 1) + 1
    return n_bases + 16 * (5 * n_bases // (2 * (w + 1))) + 16 * n_mz + 6 * 8 * n_mz + (256 << 20)


def build(ref_seq, ref_off, k: int, w: int, is_hpc: bool, b: int, log=None, stats=None):
    """``((bkt_off, keys, key_off, pos) as numpy arrays, the same four as CuPy arrays)``, or None (a note to
    ``log``) when the current GPU's free memory cannot hold the build."""
    import cupy as cp

    from g3align.kernels.loader import get_module
    mmidx.check_wk(w, k)
    n_bases = int(ref_seq.shape[0])
    free = int(cp.cuda.Device().mem_info[0]) + int(cp.get_default_memory_pool().free_bytes())
    if need(n_bases, w) > free:
        if log is not None:
            log(f"[M::mm_idx_gen] the GPU has {free / 1e9:.1f} GB free, the index of {n_bases} bp needs about "
                f"{need(n_bases, w) / 1e9:.1f} GB: building it on the CPU")
        return None
    mod = get_module("mmsketch", {"MM_K": int(k), "MM_W": int(w), "MM_HPC": int(bool(is_hpc))})
    return build_on(cp, mod, ref_seq, ref_off, k, w, is_hpc, b, stats)


def build_on(xp, mod, ref_seq, ref_off, k, w, is_hpc, b, stats=None):
    """The build with the array module ``xp`` (CuPy) and the kernel module ``mod`` (kernels/mmsketch.cu for
    these k, w, HPC); tests/test_mmgpu.py runs it with numpy and the kernels' CPU twins as well."""
    mz, n = _sketch(xp, mod, ref_seq, ref_off, k, w, is_hpc, stats)
    dev = _group(xp, mz, n, k, b)
    return tuple(xp.asnumpy(a) for a in dev), dev


def _sketch(cp, mod, ref_seq, ref_off, k, w, is_hpc, stats):
    """The minimizers of every contig on the device, (n, 2) uint64, and n (their order is not the CPU's: only
    the set matters to the grouping)."""
    ref_seq = np.ascontiguousarray(ref_seq, np.uint8)
    ref_off = np.ascontiguousarray(ref_off, np.int64)
    pc = mmidx._pieces(ref_seq, ref_off, np.int64(PIECE), np.int64(WARM), bool(is_hpc))
    np_ = int(pc.shape[0])
    if np_ == 0:
        return cp.empty((0, 2), cp.uint64), 0
    cap, cap_off = mmidx.piece_caps(pc, w)
    sw = mmidx._S_N + 2 * w + 32
    seq_d = cp.asarray(ref_seq)
    pc_d, cap_off_d, off_d = cp.asarray(pc), cp.asarray(cap_off), cp.asarray(ref_off)
    slot = cp.empty((max(int(cap_off[-1]), 1), 2), cp.uint64)
    cnt_d = cp.zeros(np_, cp.int64)
    S0_d = cp.zeros((np_, sw), cp.uint64)
    S1_d = cp.zeros((np_, sw), cp.uint64)
    mod.get_function("mm_ref_pieces")(((np_ + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                                      (seq_d, off_d, pc_d, np.int64(np_), cap_off_d, slot, cnt_d, S0_d, S1_d,
                                       np.int64(sw)))
    cnt, S0, S1 = cp.asnumpy(cnt_d), cp.asnumpy(S0_d), cp.asnumpy(S1_d)
    del seq_d, S0_d, S1_d, pc_d, off_d
    redo = mmidx.redo_pieces(ref_seq, ref_off, w, k, is_hpc, pc, cap, cnt, S0, S1)
    counts = cnt.copy()
    keep = cnt.copy()
    for p, buf in redo.items():
        counts[p] = buf.shape[0]
        keep[p] = cap[p] + 1  # not copied from its slot (mm_compact skips a count above the slot)
    off = np.zeros(np_ + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    n = int(off[-1])
    out = cp.empty((max(n, 1), 2), cp.uint64)
    off_d = cp.asarray(off)
    mod.get_function("mm_compact")(((np_ * 32 + 255) // 256,), (256,),
                                   (slot, cap_off_d, cp.asarray(cap), cp.asarray(keep), off_d, np.int64(np_), out))
    del slot
    for p, buf in redo.items():
        if buf.shape[0]:
            out[int(off[p]):int(off[p + 1])] = cp.asarray(buf)
    if stats is not None:
        stats.update(pieces=np_, redone=len(redo), minimizers=n)
    return out[:n], n


def _group(cp, mz, n, k, b):
    """mmidx._group on the device: (bkt_off int64, keys uint64, key_off int64, pos uint64) as CuPy arrays."""
    nb = 1 << b
    if n == 0:
        return (cp.zeros(nb + 1, cp.int64), cp.empty(0, cp.uint64), cp.zeros(1, cp.int64),
                cp.empty(0, cp.uint64))
    u = cp.uint64
    hi = u(2 * k - b)
    h = mz[:, 0] >> u(8)
    ka = ((h & u(nb - 1)) << hi) | (h >> u(b))
    del h
    pos = cp.ascontiguousarray(mz[:, 1])
    del mz
    o = cp.argsort(pos)  # positions ascending, then the key's stable order keeps them so within a key
    pos, ka = pos[o], ka[o]
    o = cp.argsort(ka)
    ka, pos = ka[o], pos[o]
    del o
    first = cp.empty(n, cp.bool_)
    first[0] = True
    cp.not_equal(ka[1:], ka[:-1], out=first[1:])
    starts = cp.flatnonzero(first)
    del first
    kk = ka[starts]
    del ka
    bk = kk >> hi
    keys = ((kk & ((u(1) << hi) - u(1))) << u(b)) | bk
    key_off = cp.empty(starts.shape[0] + 1, cp.int64)
    key_off[:-1] = starts
    key_off[-1] = n
    # the buckets' key offsets: bk ascends (the keys are sorted bucket first). A binary search, not bincount: CuPy's
    # bincount checks its input with (x < 0).any(), a CUB reduction that NVRTC compiles per input size at its first
    # call (5.1 s of a fresh H200 box's first map -ax sr on the 3.1 Gbp stand-in)
    bkt_off = cp.searchsorted(bk, cp.arange(nb + 1, dtype=bk.dtype)).astype(cp.int64, copy=False)
    return bkt_off, keys, key_off, pos
