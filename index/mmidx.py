"""Minimizer index of the long-read path (minimap2 2.24 semantics: sketch.c, index.c).

* :class:`MMRef` — the reference as minimap2 holds it: every contig of the FASTA/FASTQ, empty ones
  included, bases as ``uint8`` codes A0 C1 G2 T3 and 4 for anything else (``N`` stays 4; there is no
  random replacement as in bwa's packer). :func:`read_mm_ref` reads a file with :mod:`index.fasta`'s reader and
  record scanner (kseq's rules: name = header up to the first white space, sequence lines concatenated, a trailing
  CR dropped; FASTQ records' quality checked for length) and encodes it with minimap2's ``seq_nt4_table``.
* :func:`sketch` — the (w,k)-minimizers of one sequence, in minimap2's output order, as an (n, 2)
  ``uint64`` array ``[hash << 8 | span, rid << 32 | last_pos << 1 | strand]``.
* :class:`MMIndex` / :func:`build_mm_index` — minimizers of all contigs grouped by hash. A lookup
  (:func:`mm_idx_get`, njit) returns the slice of ``pos`` that holds every reference occurrence
  ``y = rid << 32 | last_pos << 1 | strand`` of a hash, in ascending order — the same values, count and
  order that minimap2's ``mm_idx_get`` returns (minimap2 sorts each multi-occurrence list by value).
  Layout: bucket ``h & (2^b - 1)`` owns ``keys[bkt_off[bucket]:bkt_off[bucket+1]]`` (sorted); the
  occurrences of ``keys[i]`` are ``pos[key_off[i]:key_off[i+1]]``.
* :func:`save_mm_index` / :func:`load_mm_index` — one versioned file with a checksummed JSON header
  and crc32-checked arrays (same scheme as :mod:`index.store`); any damage raises
  :class:`~g3align.index.store.IndexFormatError` naming the file.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np
from numba import prange

from g3align.index.fasta import (
    SCAN_BEFORE_HEADER,
    SCAN_NO_QUALITY,
    SCAN_QUALITY_LENGTH,
    MMRefFormatError,
    read_ref_bytes,
    scan_records,
)
from g3align.index.store import IndexFormatError
from g3align.jit import njit

__all__ = [
    "INT32_MAX",
    "MM_FORMAT_VERSION",
    "MM_MAGIC",
    "SEQ_NT4",
    "IndexFormatError",
    "MMIndex",
    "MMRef",
    "MMRefFormatError",
    "build_mm_index",
    "cal_max_occ",
    "encode_seq",
    "load_mm_index",
    "mm_idx_get",
    "parse_mm_seqs",
    "read_mm_ref",
    "save_mm_index",
    "sketch",
]

INT32_MAX = 2147483647
_U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)

#: minimap2's seq_nt4_table: ACGT/acgt -> 0..3, U/u -> 3, every other byte -> 4.
SEQ_NT4 = np.full(256, 4, dtype=np.uint8)
for _i, _ch in enumerate("ACGT"):
    SEQ_NT4[ord(_ch)] = _i
    SEQ_NT4[ord(_ch.lower())] = _i
SEQ_NT4[ord("U")] = 3
SEQ_NT4[ord("u")] = 3


def encode_seq(s) -> np.ndarray:
    """str/bytes -> uint8 codes (A0 C1 G2 T3, else 4)."""
    if isinstance(s, str):
        s = s.encode("latin-1")
    return SEQ_NT4[np.frombuffer(bytes(s), dtype=np.uint8)]


# ------------------------------------------------------------------------------------------------
# reference records (read and split by index.fasta; minimap2's codes and checks here)
# ------------------------------------------------------------------------------------------------

def parse_mm_seqs(data: bytes, path: str = "<bytes>"):
    """Parse FASTA/FASTQ bytes -> (names, lengths int64, offsets int64[n+1], codes uint8)."""
    r = scan_records(data, fastq=True, table=SEQ_NT4)
    if r.err == SCAN_BEFORE_HEADER:
        raise MMRefFormatError(f"{path}: not FASTA/FASTQ (text before the first '>' or '@' header)")
    if r.err == SCAN_NO_QUALITY:
        raise MMRefFormatError(f"{path}: FASTQ record {r.n} has no quality line (truncated file?)")
    if r.err == SCAN_QUALITY_LENGTH:
        raise MMRefFormatError(f"{path}: FASTQ record {r.n}: quality and sequence lengths differ")
    n = r.n
    if n and r.rec[n - 1, 0] == len(data):  # a header byte that ends the file: kseq reads no record
        n -= 1
    off = r.offsets(n)
    seq = r.seq  # sized for the whole input: cut to the bases in place (realloc), not copied
    seq.resize(int(off[-1]), refcheck=False)
    return r.names(n), np.diff(off), off, seq


@dataclass
class MMRef:
    """Reference sequences as minimap2 keeps them.

    ``ref_seq`` uint8 codes of all contigs concatenated; contig i is ``ref_seq[ref_off[i]:ref_off[i+1]]``
    (``lengths[i]`` bases, possibly 0).
    """

    names: list
    lengths: np.ndarray
    ref_off: np.ndarray
    ref_seq: np.ndarray
    src_path: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def n_seq(self) -> int:
        return len(self.names)

    def seq(self, i: int) -> np.ndarray:
        return self.ref_seq[int(self.ref_off[i]):int(self.ref_off[i + 1])]


def read_mm_ref(path) -> MMRef:
    """Read a FASTA/FASTQ (optionally gzipped) reference. Empty contigs are kept (length 0)."""
    import time

    from g3align.aligner import trace_event
    path = os.fspath(path)
    t0 = time.perf_counter()
    data = read_ref_bytes(path, minimap2=True)
    t1 = time.perf_counter()
    names, lengths, off, codes = parse_mm_seqs(data, path)
    trace_event("index: reference read", t0, t1)  # (with G3ALIGN_TRACE)
    trace_event("index: reference scan", t1, time.perf_counter())
    if not names:
        raise MMRefFormatError(f"{path}: no sequences found (empty file?)")
    if int(lengths.max()) >= 1 << 31:
        raise MMRefFormatError(f"{path}: a sequence is longer than 2^31-1 bases (unsupported)")
    return MMRef(names=names, lengths=lengths, ref_off=off, ref_seq=codes, src_path=path)


def mm_ref_from_strings(seqs, names=None) -> MMRef:
    """Small helper for tests: an MMRef from python strings."""
    names = list(names) if names is not None else [f"seq{i}" for i in range(len(seqs))]
    enc = [encode_seq(s) for s in seqs]
    lengths = np.array([len(e) for e in enc], np.int64)
    off = np.zeros(len(enc) + 1, np.int64)
    off[1:] = np.cumsum(lengths)
    codes = np.concatenate(enc) if enc else np.empty(0, np.uint8)
    return MMRef(names=names, lengths=lengths, ref_off=off, ref_seq=codes.astype(np.uint8))


# ------------------------------------------------------------------------------------------------
# minimizer sketch (sketch.c)
# ------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True, inline="always")
def hash64(key, mask):
    """minimap2's invertible integer hash restricted to ``mask`` (2k bits)."""
    key = (~key + (key << np.uint64(21))) & mask
    key = key ^ (key >> np.uint64(24))
    key = ((key + (key << np.uint64(3))) + (key << np.uint64(8))) & mask
    key = key ^ (key >> np.uint64(14))
    key = ((key + (key << np.uint64(2))) + (key << np.uint64(4))) & mask
    key = key ^ (key >> np.uint64(28))
    key = (key + (key << np.uint64(31))) & mask
    return key


@njit(cache=True, nogil=True, inline="always")
def _push(out, n, x, y):
    if n == out.shape[0]:
        grown = np.empty((out.shape[0] * 2 + 16, 2), np.uint64)
        grown[:n] = out[:n]
        out = grown
    out[n, 0] = x
    out[n, 1] = y
    return out, n + 1


# the sketch's state between two positions of a sequence (_sketch_run's S): 11 scalars, then the window ring's
# hashes and positions (w each), then the homopolymer run ring (32)
_S_KF, _S_KR, _S_L, _S_SPAN, _S_MINX, _S_MINY, _S_BPOS, _S_MPOS, _S_QF, _S_QC, _S_I = range(11)
_S_N = 11


@njit(cache=True, nogil=True)
def sketch_into(codes, st, en, w, k, rid, is_hpc, out, n):
    """Append the minimizers of codes[st:en] to out[:n] (grown as needed). Returns (out, n)."""
    S = np.empty(_S_N + 2 * w + 32, np.uint64)
    return _sketch_run(codes, st, en, 0, 0, en - st, w, k, rid, is_hpc, out, n, S, False)


@njit(cache=True, nogil=True)
def _sketch_run(codes, st, en, i0, i_emit, i_stop, w, k, rid, is_hpc, out, n, S, load):
    """mm_sketch over positions [i0, i_stop) of the sequence codes[st:en] (positions relative to st), appending
    to out[:n] only what is emitted while at positions >= i_emit (and the last minimum when i_stop is the end).
    The state starts fresh (as at the sequence's start) or, with ``load``, from S; it is saved in S at the end
    (S[_S_I]: the position reached, i_stop unless a homopolymer run crossed it).
    Returns (out, n)."""
    MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
    length = en - st
    if length <= 0:
        return out, n
    shift1 = np.uint64(2 * (k - 1))
    mask = (np.uint64(1) << np.uint64(2 * k)) - np.uint64(1)
    ridsh = np.uint64(rid) << np.uint64(32)
    bx = S[_S_N:_S_N + w]
    by = S[_S_N + w:_S_N + 2 * w]
    runs = S.view(np.int64)[_S_N + 2 * w:_S_N + 2 * w + 32]  # homopolymer run lengths of the current k-mer
    if load:
        kf, kr = S[_S_KF], S[_S_KR]
        l, span = np.int64(S[_S_L]), np.int64(S[_S_SPAN])
        min_x, min_y = S[_S_MINX], S[_S_MINY]
        bpos, mpos = np.int64(S[_S_BPOS]), np.int64(S[_S_MPOS])
        q_front, q_count = np.int64(S[_S_QF]), np.int64(S[_S_QC])
    else:
        kf = np.uint64(0)
        kr = np.uint64(0)
        bx[:] = MAX
        by[:] = MAX
        runs[:] = 0
        q_front = 0
        q_count = 0
        min_x = MAX
        min_y = MAX
        span = 0
        l = 0
        bpos = 0
        mpos = 0
    wk1 = w + k - 1
    i = i0
    while i < i_stop:
        emit = i >= i_emit
        c = codes[st + i]
        ix = MAX
        iy = MAX
        if c < 4:
            if is_hpc:
                run = 1
                if i + 1 < length and codes[st + i + 1] == c:
                    run = 2
                    while i + run < length and codes[st + i + run] == c:
                        run += 1
                    i += run - 1
                runs[(q_count + q_front) & 31] = run
                q_count += 1
                span += run
                if q_count > k:
                    span -= runs[q_front]
                    q_front = (q_front + 1) & 31
                    q_count -= 1
            else:
                span = l + 1 if l + 1 < k else k
            cu = np.uint64(c)
            kf = ((kf << np.uint64(2)) | cu) & mask
            kr = (kr >> np.uint64(2)) | ((np.uint64(3) ^ cu) << shift1)
            if kf == kr:  # palindromic k-mer: strand unknown, not a candidate and no window step
                i += 1
                continue
            z = 0 if kf < kr else 1
            l += 1
            if l >= k and span < 256:
                ix = (hash64(kf if z == 0 else kr, mask) << np.uint64(8)) | np.uint64(span)
                iy = ridsh | (np.uint64((i & 0xFFFFFFFF) << 1) & np.uint64(0xFFFFFFFF)) | np.uint64(z)
        else:
            l = 0
            q_count = 0
            q_front = 0
            span = 0
        bx[bpos] = ix
        by[bpos] = iy
        if l == wk1 and min_x != MAX and emit:
            # first full window: equal-hash k-mers seen before the minimum was fixed
            for j in range(bpos + 1, w):
                if bx[j] == min_x and by[j] != min_y:
                    out, n = _push(out, n, bx[j], by[j])
            for j in range(0, bpos):
                if bx[j] == min_x and by[j] != min_y:
                    out, n = _push(out, n, bx[j], by[j])
        if ix <= min_x:
            if l >= w + k and min_x != MAX and emit:
                out, n = _push(out, n, min_x, min_y)
            min_x = ix
            min_y = iy
            mpos = bpos
        elif bpos == mpos:
            # the minimum left the window: emit it and rescan (oldest first, ties -> the latest)
            if l >= wk1 and min_x != MAX and emit:
                out, n = _push(out, n, min_x, min_y)
            min_x = MAX
            for j in range(bpos + 1, w):
                if min_x >= bx[j]:
                    min_x = bx[j]
                    min_y = by[j]
                    mpos = j
            for j in range(0, bpos + 1):
                if min_x >= bx[j]:
                    min_x = bx[j]
                    min_y = by[j]
                    mpos = j
            if l >= wk1 and min_x != MAX and emit:
                for j in range(bpos + 1, w):
                    if bx[j] == min_x and by[j] != min_y:
                        out, n = _push(out, n, bx[j], by[j])
                for j in range(0, bpos + 1):
                    if bx[j] == min_x and by[j] != min_y:
                        out, n = _push(out, n, bx[j], by[j])
        bpos += 1
        if bpos == w:
            bpos = 0
        i += 1
    if i_stop >= length and min_x != MAX:
        out, n = _push(out, n, min_x, min_y)
    S[_S_KF], S[_S_KR], S[_S_L], S[_S_SPAN] = kf, kr, np.uint64(l), np.uint64(span)
    S[_S_MINX], S[_S_MINY], S[_S_BPOS], S[_S_MPOS] = min_x, min_y, np.uint64(bpos), np.uint64(mpos)
    S[_S_QF], S[_S_QC], S[_S_I] = np.uint64(q_front), np.uint64(q_count), np.uint64(i)
    return out, n


@njit(cache=True, nogil=True)
def _same_state(A, B, w, k):
    """Whether two sketch states (S arrays at the same position) lead to the same output from there on: the same
    k-mers, window contents in age order, minimum and its place in the window, and the counters as far as the
    sketch tells them apart (l only up to w + k, where every test on it is settled)."""
    MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
    cap = np.uint64(w + k)
    if (A[_S_I] != B[_S_I] or A[_S_SPAN] != B[_S_SPAN] or min(A[_S_L], cap) != min(B[_S_L], cap)
            or A[_S_MINX] != B[_S_MINX] or A[_S_MINY] != B[_S_MINY] or A[_S_QC] != B[_S_QC]):
        return False
    # the k-mer registers: whole, or with k odd only the l bases read since the last N (kf's low bits, kr's high
    # bits). The older ones shift out before any k-mer is a candidate (that needs l >= k), and with k odd no k-mer
    # equals its reverse complement (nor does a register pair begun from zeros), so the palindrome test never
    # depends on them: inside a long N run a piece's fresh warm-up then matches the sequential sketch, which still
    # holds the bases before the run.
    l = A[_S_L]
    if k % 2 == 1 and l < np.uint64(k):
        lo = (np.uint64(1) << np.uint64(2 * l)) - np.uint64(1)
        hi = np.uint64(2 * (k - l))
        if (A[_S_KF] & lo) != (B[_S_KF] & lo) or (A[_S_KR] >> hi) != (B[_S_KR] >> hi):
            return False
    elif A[_S_KF] != B[_S_KF] or A[_S_KR] != B[_S_KR]:
        return False
    ba, bb = np.int64(A[_S_BPOS]), np.int64(B[_S_BPOS])
    if A[_S_MINX] != MAX and (np.int64(A[_S_MPOS]) - ba) % w != (np.int64(B[_S_MPOS]) - bb) % w:
        return False
    for j in range(w):
        ja, jb = _S_N + (ba + j) % w, _S_N + (bb + j) % w
        if A[ja] != B[jb] or A[ja + w] != B[jb + w]:
            return False
    qa, qb = np.int64(A[_S_QF]), np.int64(B[_S_QF])
    for j in range(np.int64(A[_S_QC])):
        if A[_S_N + 2 * w + ((qa + j) & 31)] != B[_S_N + 2 * w + ((qb + j) & 31)]:
            return False
    return True


@njit(cache=True, nogil=True)
def sketch(codes, w, k, rid, is_hpc):
    """Minimizers of one sequence (uint8 codes) -> (n, 2) uint64, exactly as minimap2's mm_sketch.

    Requires 0 < w < 256 and 0 < k <= 28. An empty sequence gives no minimizers.
    """
    length = codes.shape[0]
    out = np.empty((length * 2 // (w + 1) + 16, 2), np.uint64)
    out, n = sketch_into(codes, 0, length, w, k, rid, is_hpc, out, 0)
    return out[:n].copy()


def check_wk(w: int, k: int):
    if not (0 < w < 256) or not (0 < k <= 28):
        raise ValueError(f"minimizer parameters out of range: need 0 < w < 256 and 0 < k <= 28 (w={w}, k={k})")


# ------------------------------------------------------------------------------------------------
# index build (index.c: mm_idx_gen + mm_idx_post)
# ------------------------------------------------------------------------------------------------

SKETCH_PIECE = 1 << 20  # bases per piece of a contig, the pieces sketched in parallel (index build)
SKETCH_WARM = 4096      # bases sketched, unemitted, before a piece's start to rebuild the sketch's state there


@njit(cache=True, nogil=True)
def _pieces(ref_seq, ref_off, piece, warm, is_hpc):
    """Pieces of the contigs: (contig, warm-up start, start, end), positions from the contig's start. With HPC a
    piece ends where the base changes, so that no homopolymer run crosses it."""
    nseq = ref_off.shape[0] - 1
    m = 0
    for r in range(nseq):
        m += (ref_off[r + 1] - ref_off[r] + piece - 1) // piece
    out = np.empty((m, 4), np.int64)
    m = 0
    for r in range(nseq):
        st, L = ref_off[r], ref_off[r + 1] - ref_off[r]
        s = 0
        while s < L:
            e = min(L, s + piece)
            while is_hpc and e < L and ref_seq[st + e] < 4 and ref_seq[st + e] == ref_seq[st + e - 1]:
                e += 1
            out[m, 0], out[m, 1], out[m, 2], out[m, 3] = r, max(0, s - warm) if s > 0 else 0, s, e
            m += 1
            s = e
    return out[:m]


@njit(cache=True, nogil=True, parallel=True)
def _sketch_pieces(ref_seq, ref_off, w, k, is_hpc, pc, cap_off, out, cnt, S0, S1):
    """Every piece sketched on its own (prange): from a fresh state after SKETCH_WARM bases of warm-up (S0: the
    state reached at its start), into out[cap_off[p]:cap_off[p+1]]; cnt[p] minimizers (above the capacity: the
    piece overflowed, to be redone); S1: the state at its end."""
    for p in prange(pc.shape[0]):
        r, i0, s, e = pc[p, 0], pc[p, 1], pc[p, 2], pc[p, 3]
        st, en = ref_off[r], ref_off[r + 1]
        buf = out[cap_off[p]:cap_off[p + 1]]
        load = i0 < s
        if load:
            _sketch_run(ref_seq, st, en, i0, s, s, w, k, r, is_hpc, buf, 0, S0[p], False)
            S1[p, :] = S0[p, :]
        _, m = _sketch_run(ref_seq, st, en, s, s, e, w, k, r, is_hpc, buf, 0, S1[p], load)
        cnt[p] = m


def piece_caps(pc, w):
    """Each piece's output slot (records) and the slots' offsets: 2.5 minimizers per w + 1 bases, + 64."""
    ln = pc[:, 3] - pc[:, 2]
    cap = ln * 5 // (2 * (w + 1)) + 64
    cap_off = np.zeros(pc.shape[0] + 1, np.int64)
    np.cumsum(cap, out=cap_off[1:])
    return cap, cap_off


@njit(cache=True, nogil=True, parallel=True)
def _bad_pieces(pc, cnt, cap, S0, S1, w, k):
    """Pieces whose output cannot be kept: overflowed (cnt > cap), or started (after the warm-up) in a state that
    differs from the one the piece before it ended in."""
    n = pc.shape[0]
    bad = np.zeros(n, np.bool_)
    for p in prange(n):
        cont = pc[p, 1] < pc[p, 2]
        bad[p] = cnt[p] > cap[p] or (cont and not _same_state(S1[p - 1], S0[p], w, k))
    return bad


def redo_pieces(ref_seq, ref_off, w, k, is_hpc, pc, cap, cnt, S0, S1) -> dict:
    """The pieces whose sketch is not kept (_bad_pieces), sketched again on the CPU in order, each from the true
    state (the end state of the piece before it, as corrected here: S1 is updated), with the piece after a redone
    one checked again against that state. Returns {piece: its minimizers}."""
    import heapq
    todo = np.flatnonzero(_bad_pieces(pc, cnt, cap, S0, S1, int(w), int(k))).tolist()
    heapq.heapify(todo)
    queued = set(todo)
    sw = S1.shape[1]
    redo = {}
    while todo:
        p = heapq.heappop(todo)
        r, i0, s, e = (int(x) for x in pc[p])
        cont = i0 < s  # not the contig's first piece
        S = S1[p - 1].copy() if cont else np.zeros(sw, np.uint64)
        buf, m = _sketch_run(ref_seq, ref_off[r], ref_off[r + 1], s, s, e, int(w), int(k), r, bool(is_hpc),
                             np.empty((int(cap[p]) * 2, 2), np.uint64), 0, S, cont)
        redo[p] = buf[:m]
        S1[p] = S
        q = p + 1
        if q < pc.shape[0] and q not in queued and pc[q, 1] < pc[q, 2] and not _same_state(S1[p], S0[q], w, k):
            heapq.heappush(todo, q)
            queued.add(q)
    return redo


def _sketch_all(ref_seq, ref_off, w, k, is_hpc):
    """The minimizers of every contig, in order, as one (n, 2) array and n: long contigs are cut into pieces
    sketched in parallel, each after a warm-up that rebuilds the sketch's state at its start. A piece's output is
    kept only when that state equals the state the piece before it ended in (_same_state), so the result is the
    sequential sketch's exactly; a piece whose state differs (a warm-up too short for a long repeat) or that
    overflowed its buffer is sketched again from the true state (redo_pieces). index/mmgpu.py does the same on the
    GPU, in smaller pieces."""
    pc = _pieces(ref_seq, ref_off, np.int64(SKETCH_PIECE), np.int64(SKETCH_WARM), bool(is_hpc))
    np_ = pc.shape[0]
    if np_ == 0:
        return np.empty((0, 2), np.uint64), 0
    cap, cap_off = piece_caps(pc, w)
    out = np.empty((int(cap_off[-1]), 2), np.uint64)
    cnt = np.zeros(np_, np.int64)
    sw = _S_N + 2 * w + 32
    S0 = np.zeros((np_, sw), np.uint64)
    S1 = np.zeros((np_, sw), np.uint64)
    _sketch_pieces(ref_seq, ref_off, int(w), int(k), bool(is_hpc), pc, cap_off, out, cnt, S0, S1)
    redo = redo_pieces(ref_seq, ref_off, w, k, is_hpc, pc, cap, cnt, S0, S1)
    parts = [redo[p] if p in redo else out[cap_off[p]:cap_off[p] + cnt[p]] for p in range(np_)]
    mz = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return mz, int(mz.shape[0])


def _group(mz, n, k, b):
    """Sort minimizers by (bucket, hash, position); return bkt_off, keys, key_off, pos (_group_buckets in
    parallel; _group_lsd, one thread, above 2^16 buckets, where _group_buckets' per-piece bucket counts would take
    64 x 2^b x 8 bytes)."""
    if b > 16:
        return _group_lsd(mz, n, k, b)
    return _group_buckets(mz, n, b)


@njit(cache=True, nogil=True, parallel=True)
def _group_buckets(mz, n, b):
    """_group in parallel: the minimizers scattered to their buckets (pieces of the input counted and placed
    independently), then every bucket sorted by (hash, position) and its keys listed on its own. The order is
    _group_lsd's: (bucket, hash) with each hash's positions ascending."""
    MAXP = 64
    bmask = (np.uint64(1) << np.uint64(b)) - np.uint64(1)
    nb = 1 << b
    per = max(1, (n + MAXP - 1) // MAXP)
    npc = (n + per - 1) // per
    hist = np.zeros((npc, nb), np.int64)
    for c in prange(npc):
        for i in range(c * per, min(n, (c + 1) * per)):
            hist[c, np.int64((mz[i, 0] >> np.uint64(8)) & bmask)] += 1
    start = np.zeros(nb + 1, np.int64)
    off = np.empty((npc, nb), np.int64)
    acc = 0
    for bk in range(nb):
        start[bk] = acc
        for c in range(npc):
            off[c, bk] = acc
            acc += hist[c, bk]
    start[nb] = acc
    hk = np.empty(n, np.uint64)   # hash >> b, within its bucket
    pa = np.empty(n, np.uint64)
    for c in prange(npc):
        o = off[c].copy()
        for i in range(c * per, min(n, (c + 1) * per)):
            h = mz[i, 0] >> np.uint64(8)
            bk = np.int64(h & bmask)
            j = o[bk]
            o[bk] = j + 1
            hk[j] = h >> np.uint64(b)
            pa[j] = mz[i, 1]
    nkey = np.zeros(nb, np.int64)
    for bk in prange(nb):
        s, e = start[bk], start[bk + 1]
        if e - s > 1:
            order = np.argsort(hk[s:e], kind="mergesort")
            hk[s:e] = hk[s:e][order]
            pa[s:e] = pa[s:e][order]
        t0 = s
        for t in range(s + 1, e + 1):  # the runs of one key [t0, t)
            if t == e or hk[t] != hk[t0]:
                for u in range(t0 + 1, t):  # its positions: sorted unless already ascending
                    if pa[u] < pa[u - 1]:
                        pa[t0:t].sort()
                        break
                nkey[bk] += 1
                t0 = t
    bkt_off = np.zeros(nb + 1, np.int64)
    for bk in range(nb):
        bkt_off[bk + 1] = bkt_off[bk] + nkey[bk]
    n_keys = bkt_off[nb]
    keys = np.empty(n_keys, np.uint64)
    key_off = np.empty(n_keys + 1, np.int64)
    key_off[n_keys] = n
    for bk in prange(nb):
        j = bkt_off[bk]
        for t in range(start[bk], start[bk + 1]):
            if t == start[bk] or hk[t] != hk[t - 1]:
                keys[j] = (hk[t] << np.uint64(b)) | np.uint64(bk)
                key_off[j] = t
                j += 1
    return bkt_off, keys, key_off, pa


@njit(cache=True, nogil=True)
def _group_lsd(mz, n, k, b):
    """Sort minimizers by (bucket, hash, position); return bkt_off, keys, key_off, pos.

    The sort key is ``(h & bucket_mask) << (2k - b) | h >> b`` (a bijection of the 2k-bit hash h);
    an LSD radix sort (stable) carries the positions along, and each multi-occurrence list is then
    sorted by value, which is the order minimap2's index returns them in.
    """
    bmask = (np.uint64(1) << np.uint64(b)) - np.uint64(1)
    nbits = 2 * k
    hi = np.uint64(nbits - b)
    ka = np.empty(n, np.uint64)
    pa = np.empty(n, np.uint64)
    for i in range(n):
        h = mz[i, 0] >> np.uint64(8)
        ka[i] = ((h & bmask) << hi) | (h >> np.uint64(b))
        pa[i] = mz[i, 1]
    kb = np.empty(n, np.uint64)
    pb = np.empty(n, np.uint64)
    dbits = 11
    dmask = np.uint64((1 << dbits) - 1)
    cnt = np.empty((1 << dbits) + 1, np.int64)
    shift = 0
    while shift < nbits:
        sh = np.uint64(shift)
        cnt[:] = 0
        for i in range(n):
            cnt[np.int64((ka[i] >> sh) & dmask) + 1] += 1
        for d in range(1 << dbits):
            cnt[d + 1] += cnt[d]
        for i in range(n):
            d = np.int64((ka[i] >> sh) & dmask)
            j = cnt[d]
            cnt[d] = j + 1
            kb[j] = ka[i]
            pb[j] = pa[i]
        ka, kb = kb, ka
        pa, pb = pb, pa
        shift += dbits
    n_keys = 0
    for i in range(n):
        if i == 0 or ka[i] != ka[i - 1]:
            n_keys += 1
    keys = np.empty(n_keys, np.uint64)
    key_off = np.empty(n_keys + 1, np.int64)
    nb = 1 << b
    bkt_off = np.zeros(nb + 1, np.int64)
    lomask = (np.uint64(1) << hi) - np.uint64(1)
    j = -1
    for i in range(n + 1):
        if i == n or i == 0 or ka[i] != ka[i - 1]:
            if j >= 0:
                # positions of one key: sort unless already ascending
                for t in range(key_off[j] + 1, i):
                    if pa[t] < pa[t - 1]:
                        pa[key_off[j]:i].sort()
                        break
            if i == n:
                break
            j += 1
            bk = ka[i] >> hi
            keys[j] = ((ka[i] & lomask) << np.uint64(b)) | bk
            key_off[j] = i
            bkt_off[np.int64(bk) + 1] += 1
    key_off[n_keys] = n
    for i in range(nb):
        bkt_off[i + 1] += bkt_off[i]
    return bkt_off, keys, key_off, pa


@njit(cache=True, nogil=True)
def mm_idx_get(b, bkt_off, keys, key_off, h):
    """Look up minimizer hash ``h`` (x >> 8). Returns (start, count): the occurrences are
    ``pos[start:start+count]`` in minimap2's order; count 0 when absent."""
    bk = np.int64(h & ((np.uint64(1) << np.uint64(b)) - np.uint64(1)))
    lo = bkt_off[bk]
    hi = bkt_off[bk + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    if lo < bkt_off[bk + 1] and keys[lo] == h:
        return key_off[lo], key_off[lo + 1] - key_off[lo]
    return np.int64(0), np.int64(0)


@dataclass
class MMIndex:
    """A minimizer index (see the module docstring for the layout)."""

    k: int
    w: int
    b: int
    is_hpc: bool
    ref: MMRef
    bkt_off: np.ndarray
    keys: np.ndarray
    key_off: np.ndarray
    pos: np.ndarray
    extra: dict = field(default_factory=dict)

    @property
    def n_keys(self) -> int:
        return int(self.keys.shape[0])

    @property
    def n_pos(self) -> int:
        return int(self.pos.shape[0])

    def arrays(self):
        """(b, bkt_off, keys, key_off, pos): what the njit query code takes."""
        return self.b, self.bkt_off, self.keys, self.key_off, self.pos

    def get(self, h: int) -> np.ndarray:
        """Positions (uint64 ``rid << 32 | pos << 1 | strand``) of minimizer hash h, as mm_idx_get."""
        st, cnt = mm_idx_get(self.b, self.bkt_off, self.keys, self.key_off, np.uint64(h))
        return self.pos[st:st + cnt]

    def occ_counts(self) -> np.ndarray:
        return np.diff(self.key_off)

    def cal_max_occ(self, frac: float) -> int:
        return cal_max_occ(self, frac)


def build_mm_index(ref: MMRef, k: int, w: int, is_hpc: bool, bucket_bits: int = 14, device: str = "cpu",
                   log=None) -> MMIndex:
    """Index all contigs of ``ref`` (minimap2 ``mm_idx_gen`` in one batch; -I is not emulated). ``device="gpu"``
    sketches and sorts on the current GPU (index/mmgpu.py; the same arrays byte for byte, and their device copies
    in ``extra["device"]`` for the mapping), or on the CPU, with a note to ``log``, where the GPU cannot hold it."""
    check_wk(w, k)
    b = int(bucket_bits)
    if k * 2 < b:
        b = k * 2
    if not (0 < b <= 32):
        raise ValueError(f"bucket_bits out of range: {bucket_bits}")
    if device == "gpu":
        from g3align.index import mmgpu
        built = mmgpu.build(ref.ref_seq, ref.ref_off, int(k), int(w), bool(is_hpc), b, log=log)
        if built is not None:
            (bkt_off, keys, key_off, pos), dev = built
            return MMIndex(k=int(k), w=int(w), b=b, is_hpc=bool(is_hpc), ref=ref, bkt_off=bkt_off, keys=keys,
                           key_off=key_off, pos=pos, extra={"device": dev})
    mz, n = _sketch_all(ref.ref_seq, ref.ref_off, int(w), int(k), bool(is_hpc))
    bkt_off, keys, key_off, pos = _group(mz, n, int(k), b)
    return MMIndex(k=int(k), w=int(w), b=b, is_hpc=bool(is_hpc), ref=ref, bkt_off=bkt_off, keys=keys,
                   key_off=key_off, pos=pos)


def cal_max_occ(idx: MMIndex, frac: float) -> int:
    """minimap2's mm_idx_cal_max_occ: 1 + the occurrence count at rank (1-frac)*n_distinct.

    ``frac`` is taken as a C float (minimap2 keeps it in a float), promoted to double as in C.
    """
    f = float(np.float32(frac))
    if f <= 0.0:
        return INT32_MAX
    cnt = np.diff(idx.key_off)
    n = cnt.shape[0]
    if n == 0:
        return 1
    kk = int((1.0 - f) * n)
    kk = min(max(kk, 0), n - 1)
    # the kk-th smallest count (0-based) from the counts' histogram: O(n), where np.partition took ~1 s on
    # chr20's 6.2M counts (90 % of them equal to 1)
    hist = np.bincount(cnt)
    return int(np.searchsorted(np.cumsum(hist), kk, side="right")) + 1


# ------------------------------------------------------------------------------------------------
# storage
# ------------------------------------------------------------------------------------------------

MM_MAGIC = b"G3AMMI\r\n"
MM_FORMAT_VERSION = 1
_FIXED = struct.Struct("<8sIIQQ")  # magic, version, header crc32, header length, file size
_ALIGN = 64
_ARRAYS = ("ref_seq", "ref_off", "lengths", "bkt_off", "keys", "key_off", "pos")
_DTYPES = {"ref_seq": np.uint8, "ref_off": np.int64, "lengths": np.int64, "bkt_off": np.int64,
           "keys": np.uint64, "key_off": np.int64, "pos": np.uint64}


def _crc(arr: np.ndarray) -> int:
    mv = memoryview(np.ascontiguousarray(arr)).cast("B")
    crc = 0
    step = 1 << 26
    for i in range(0, len(mv), step):
        crc = zlib.crc32(mv[i:i + step], crc)
    return crc & 0xFFFFFFFF


def save_mm_index(path, idx: MMIndex) -> str:
    """Write the index (reference included) to ``path`` atomically. Returns the path."""
    path = os.fspath(path)
    src = {"ref_seq": idx.ref.ref_seq, "ref_off": idx.ref.ref_off, "lengths": idx.ref.lengths,
           "bkt_off": idx.bkt_off, "keys": idx.keys, "key_off": idx.key_off, "pos": idx.pos}
    arrays = {name: np.ascontiguousarray(src[name], dtype=_DTYPES[name]) for name in _ARRAYS}
    table = {name: {"dtype": a.dtype.str, "shape": list(a.shape), "nbytes": int(a.nbytes), "crc32": _crc(a),
                    "offset": 0} for name, a in arrays.items()}
    meta = {"format": "g3align-mm-index", "version": MM_FORMAT_VERSION,
            "params": {"k": idx.k, "w": idx.w, "b": idx.b, "is_hpc": int(idx.is_hpc)},
            "ref": {"names": list(idx.ref.names), "src_path": idx.ref.src_path},
            "arrays": table}

    def layout(hlen):
        off = _FIXED.size + hlen
        for name in arrays:
            off = (off + _ALIGN - 1) // _ALIGN * _ALIGN
            table[name]["offset"] = off
            off += table[name]["nbytes"]
        return off

    hlen = len(json.dumps(meta).encode("utf-8", "surrogateescape")) + 256
    for _ in range(4):
        total = layout(hlen)
        meta["file_size"] = total
        hdr = json.dumps(meta).encode("utf-8", "surrogateescape")
        if len(hdr) <= hlen:
            break
        hlen = len(hdr) + 256
    hdr = hdr + b" " * (hlen - len(hdr))
    tmp = f"{path}.tmp{os.getpid()}"
    from g3align.aligner.runtime import stop
    stop.TEMP.add(tmp)  # removed if the run is stopped while writing
    try:
        with open(tmp, "wb") as fh:
            fh.write(_FIXED.pack(MM_MAGIC, MM_FORMAT_VERSION, zlib.crc32(hdr) & 0xFFFFFFFF, hlen, total))
            fh.write(hdr)
            for name, a in arrays.items():
                off = table[name]["offset"]
                here = fh.tell()
                if off > here:
                    fh.write(b"\0" * (off - here))
                if a.nbytes:
                    fh.write(memoryview(a).cast("B"))
        os.replace(tmp, path)
    finally:
        stop.TEMP.discard(tmp)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _header(path: str):
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise IndexFormatError(f"{path}: minimizer index file not found") from None
    except OSError as e:
        raise IndexFormatError(f"{path}: cannot open minimizer index: {e.strerror}") from None
    with fh:
        fixed = fh.read(_FIXED.size)
        if len(fixed) < _FIXED.size:
            raise IndexFormatError(f"{path}: not a g3align minimizer index (file too short, truncated?)")
        magic, version, hcrc, hlen, fsize = _FIXED.unpack(fixed)
        if magic != MM_MAGIC:
            raise IndexFormatError(f"{path}: not a g3align minimizer index (bad magic)")
        if version != MM_FORMAT_VERSION:
            raise IndexFormatError(f"{path}: minimizer index format version {version} is not supported (this "
                                   f"g3align reads version {MM_FORMAT_VERSION}); rebuild it")
        actual = os.fstat(fh.fileno()).st_size
        if actual != fsize:
            raise IndexFormatError(f"{path}: minimizer index is truncated or damaged (size {actual} bytes, "
                                   f"expected {fsize})")
        if hlen > fsize:
            raise IndexFormatError(f"{path}: minimizer index header is corrupt (bad header length)")
        hdr = fh.read(hlen)
    if len(hdr) != hlen or (zlib.crc32(hdr) & 0xFFFFFFFF) != hcrc:
        raise IndexFormatError(f"{path}: minimizer index header is corrupt (checksum mismatch)")
    try:
        meta = json.loads(hdr.decode("utf-8", "surrogateescape"))
        _ = meta["arrays"], meta["params"], meta["ref"]["names"]
    except (ValueError, KeyError, TypeError) as e:
        raise IndexFormatError(f"{path}: minimizer index header is corrupt ({e})") from None
    return meta, fsize


def load_mm_index(path, verify: bool = True, use_mmap: bool = True) -> MMIndex:
    """Load an index written by :func:`save_mm_index`; checks every array's crc32 unless verify=False."""
    path = os.fspath(path)
    meta, fsize = _header(path)
    arrays = {}
    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if use_mmap and fsize else None
        for name in _ARRAYS:
            try:
                d = meta["arrays"][name]
                dt = np.dtype(d["dtype"])
                shape = tuple(int(x) for x in d["shape"])
                off, nb = int(d["offset"]), int(d["nbytes"])
                cnt = int(np.prod(shape)) if shape else 1
            except (TypeError, ValueError, KeyError) as e:
                raise IndexFormatError(f"{path}: minimizer index header is corrupt (array {name}: {e})") from None
            if dt != np.dtype(_DTYPES[name]) or off < 0 or off + nb > fsize or cnt * dt.itemsize != nb:
                raise IndexFormatError(f"{path}: minimizer index header is corrupt (array {name})")
            if buf is not None:
                a = np.frombuffer(buf, dtype=dt, count=cnt, offset=off) if cnt else np.empty(0, dt)
            else:
                fh.seek(off)
                a = np.fromfile(fh, dtype=dt, count=cnt)
                if a.size != cnt:
                    raise IndexFormatError(f"{path}: minimizer index is truncated (array {name})")
            a = a.reshape(shape)
            if verify and _crc(a) != int(d["crc32"]):
                raise IndexFormatError(f"{path}: minimizer index is corrupt (checksum mismatch in array {name})")
            arrays[name] = a
    try:
        p = meta["params"]
        k, w, b, is_hpc = int(p["k"]), int(p["w"]), int(p["b"]), bool(p["is_hpc"])
        names = [str(x) for x in meta["ref"]["names"]]
        src_path = str(meta["ref"].get("src_path", ""))
    except (KeyError, TypeError, ValueError) as e:
        raise IndexFormatError(f"{path}: minimizer index header is corrupt (missing {e})") from None
    ref = MMRef(names=names, lengths=arrays["lengths"], ref_off=arrays["ref_off"], ref_seq=arrays["ref_seq"],
                src_path=src_path)
    idx = MMIndex(k=k, w=w, b=b, is_hpc=is_hpc, ref=ref, bkt_off=arrays["bkt_off"], keys=arrays["keys"],
                  key_off=arrays["key_off"], pos=arrays["pos"], extra={"meta": meta, "index_path": path})
    if not _consistent(idx):
        raise IndexFormatError(f"{path}: minimizer index is inconsistent (array sizes disagree)")
    return idx


def _consistent(idx: MMIndex) -> bool:
    """Sizes the njit lookups rely on (they do no bounds checking)."""
    r = idx.ref
    n = len(r.names)
    if not (0 < idx.w < 256 and 0 < idx.k <= 28 and 0 < idx.b <= 32):
        return False
    ok = (r.ref_off.shape == (n + 1,) and r.lengths.shape == (n,) and idx.bkt_off.shape == ((1 << idx.b) + 1,)
          and idx.key_off.shape == (idx.keys.shape[0] + 1,) and r.ref_seq.ndim == 1 and idx.pos.ndim == 1)
    if not ok:
        return False
    return (int(r.ref_off[0]) == 0 and int(r.ref_off[-1]) == r.ref_seq.shape[0]
            and bool(np.all(np.diff(r.ref_off) == r.lengths))
            and int(idx.bkt_off[0]) == 0 and int(idx.bkt_off[-1]) == idx.keys.shape[0]
            and bool(np.all(np.diff(idx.bkt_off) >= 0))
            and int(idx.key_off[0]) == 0 and int(idx.key_off[-1]) == idx.pos.shape[0]
            and bool(np.all(np.diff(idx.key_off) > 0)))
