"""`g3align map`: minimap2 2.24's mapping of reads and fragments (map.c's mm_map_frag) in batches.

Python orchestrates; each batch is cut into ranges of reads and every range runs through one Numba
`nogil` kernel (`map_range`) that maps its reads one after the other and formats their PAF/SAM
records into a byte buffer.  Ranges run on a thread pool and their buffers are written in input
order, so the output does not depend on the batch size or the number of threads.

Stages per read (modules in docs/MM_PORT.md): seeds (aligner/map/seed.py) -> chaining and regions
(aligner/map/lchain.py) -> parent/secondary selection, error estimate (aligner/map/hit.py) -> alignment
(aligner/map/align.py, with -a/-c/--cs/--MD) -> MAPQ (aligner/map/hit.py) -> records
(aligner/map/format.py).

Options travel into the kernel as two vectors: `iv` (int64) and `fv` (float32, the C floats of
mm_mapopt_t), indexed by the constants below.
"""
from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from g3align.aligner import BATCH_END, Progress, lap, log, trace_event
from g3align.aligner.gpu.pinned import on_stream
from g3align.aligner.io.reads import base_ranges, frag_offsets
from g3align.aligner.map import align as MA
from g3align.aligner.map import hit as MH
from g3align.aligner.map import lchain as LC
from g3align.aligner.map import options as MO
from g3align.aligner.map.format import write_frag, write_read
from g3align.aligner.map.gpu import ksw2 as KG
from g3align.aligner.map.sdust import dust_batch
from g3align.aligner.map.seed import seed_hits, seed_read
from g3align.aligner.map.types import CIG_OFF, CNT, NR, QE, QS, REV
from g3align.aligner.runtime.nbshare import unowned
from g3align.jit import njit

# int options
(I_FLAG, I_SEED, I_MAX_QLEN, I_BW, I_BW_LONG, I_MAX_GAP, I_MAX_GAP_REF, I_MAX_FRAG_LEN, I_MAX_CHAIN_SKIP,
 I_MAX_CHAIN_ITER, I_MIN_CNT, I_MIN_CHAIN_SCORE, I_RMQ_SIZE_CAP, I_RMQ_INNER_DIST, I_RMQ_RESCUE_SIZE,
 I_MASK_LEN, I_BEST_N, I_A, I_B, I_Q, I_E, I_Q2, I_E2, I_SC_AMBI, I_ZDROP, I_ZDROP_INV, I_END_BONUS,
 I_MIN_DP_MAX, I_MIN_KSW_LEN, I_ANCHOR_EXT_LEN, I_ANCHOR_EXT_SHIFT, I_MID_OCC, I_MAX_OCC, I_MAX_MAX_OCC,
 I_OCC_DIST, I_MAX_SW_MAT, I_K, I_W, I_HPC, I_RANK_MIN_LEN, I_PE_ORI, I_PE_BONUS, I_SDUST) = range(43)
NI = 43
# float options (C floats)
(F_CHAIN_GAP_SCALE, F_CHAIN_SKIP_SCALE, F_RMQ_RESCUE_RATIO, F_MASK_LEVEL, F_PRI_RATIO, F_ALT_DROP,
 F_MAX_CLIP_RATIO, F_Q_OCC_FRAC, F_RANK_FRAC) = range(9)
NF = 9


def pack_opts(o: MO.MapOpt) -> tuple[np.ndarray, np.ndarray]:
    iv = np.zeros(NI, np.int64)
    for idx, v in ((I_FLAG, o.flag), (I_SEED, o.seed), (I_MAX_QLEN, o.max_qlen), (I_BW, o.bw),
                   (I_BW_LONG, o.bw_long), (I_MAX_GAP, o.max_gap), (I_MAX_GAP_REF, o.max_gap_ref),
                   (I_MAX_FRAG_LEN, o.max_frag_len), (I_MAX_CHAIN_SKIP, o.max_chain_skip),
                   (I_MAX_CHAIN_ITER, o.max_chain_iter), (I_MIN_CNT, o.min_cnt),
                   (I_MIN_CHAIN_SCORE, o.min_chain_score), (I_RMQ_SIZE_CAP, o.rmq_size_cap),
                   (I_RMQ_INNER_DIST, o.rmq_inner_dist), (I_RMQ_RESCUE_SIZE, o.rmq_rescue_size),
                   (I_MASK_LEN, o.mask_len), (I_BEST_N, o.best_n), (I_A, o.a), (I_B, o.b), (I_Q, o.q),
                   (I_E, o.e), (I_Q2, o.q2), (I_E2, o.e2), (I_SC_AMBI, o.sc_ambi), (I_ZDROP, o.zdrop),
                   (I_ZDROP_INV, o.zdrop_inv), (I_END_BONUS, o.end_bonus), (I_MIN_DP_MAX, o.min_dp_max),
                   (I_MIN_KSW_LEN, o.min_ksw_len), (I_ANCHOR_EXT_LEN, o.anchor_ext_len),
                   (I_ANCHOR_EXT_SHIFT, o.anchor_ext_shift), (I_MID_OCC, o.mid_occ), (I_MAX_OCC, o.max_occ),
                   (I_MAX_MAX_OCC, o.max_max_occ), (I_OCC_DIST, o.occ_dist), (I_MAX_SW_MAT, o.max_sw_mat),
                   (I_K, o.k), (I_W, o.w), (I_HPC, int(o.is_hpc)), (I_RANK_MIN_LEN, o.rank_min_len),
                   (I_PE_ORI, o.pe_ori), (I_PE_BONUS, o.pe_bonus), (I_SDUST, o.sdust_thres)):
        iv[idx] = v
    fv = np.zeros(NF, np.float32)
    for idx, v in ((F_CHAIN_GAP_SCALE, o.chain_gap_scale), (F_CHAIN_SKIP_SCALE, o.chain_skip_scale),
                   (F_RMQ_RESCUE_RATIO, o.rmq_rescue_ratio), (F_MASK_LEVEL, o.mask_level),
                   (F_PRI_RATIO, o.pri_ratio), (F_ALT_DROP, o.alt_drop), (F_MAX_CLIP_RATIO, o.max_clip_ratio),
                   (F_Q_OCC_FRAC, o.q_occ_frac), (F_RANK_FRAC, o.rank_frac)):
        fv[idx] = v
    return iv, fv


_NO_LJOIN_FLAGS = MO.F_SPLICE | MO.F_SR | MO.F_NO_LJOIN

# run_map's part pipeline: each -K batch is read as parts of about reads.MAP_PART_BASES bases
# (reads.read_batch_parts), and up to MAP_DEPTH parts are mapped at once, each on its own worker thread
# (with the GPU: its own CUDA stream), sharing one pool of -t threads for the per-read stages. Parts never
# change the output (records are written in input order; no per-read result depends on the batch).
# G3ALIGN_TUNE='MAP_DEPTH=1' maps one part after another. Four at once: chr20 pbsim CLR on the H100
# (docs/BENCHMARKS.md's git history) took 5.21/5.25 s vs 6.16/5.86 s with three and 5.81/5.64 s with five in one
# measurement, and four was also at or ahead of three in two others (5.12 vs 5.15-5.96 s; 7.40 vs 7.58-7.67 s).
MAP_DEPTH = 4
# parts handed to the workers beyond the MAP_DEPTH being mapped, so that a worker that finishes its part takes the
# next at once instead of waiting for the oldest part in flight to be written (records still go out in input
# order); 0: a part is handed over only when the oldest one is done
MAP_QUEUED = 4
MAP_SWITCH_INTERVAL_US = 500  # sys.setswitchinterval of map's GPU path, microseconds (0: Python's 5 ms)
# GPU scratch of one ksw2 launch (bytes): a part's jobs run in as many launches as their scratch needs, each
# launch ending in a tail where its longest jobs run alone
MAP_KSW2_SCRATCH = KG.SCRATCH_BYTES
# GPU memory (bytes) each part worker takes into CuPy's pool for each of its streams at its start
# (MapAligner.worker_init, pinned.reserve_pool), at most a 2 * MAP_DEPTH-th of the free memory; 0: none
MAP_POOL_RESERVE = 4 << 30


@njit(cache=True, nogil=True)
def map_one(q, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off, dual_skip, diag_rid,
            pre, mv_p, a_p, rep_p, mini_p, fp_on, f_p, p_p):
    """mm_map_frag for one single-segment read (codes q, name bytes).  pre: the read's seeds were
    computed for the whole batch beforehand (aligner/map/gpu/seed.py: mv_p, a_p, rep_p, mini_p, exactly
    what seed_read returns), else seed_read runs here.  fp_on: the DP chaining scores f_p / predecessors
    p_p of those anchors were computed for the batch too (aligner/map/gpu/lchain.py); only the backtracking
    runs here (the RMQ chaining and the rare re-chaining calls still run whole here).

    Returns (R, n_regs, cigar buffer, rep_len)."""
    ok, R, n, a, rep_len = map_one_pre(q, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, dual_skip,
                                       diag_rid, pre, mv_p, a_p, rep_p, mini_p, fp_on, f_p, p_p)
    return map_one_post(ok, q, iv, fv, R, n, a, rep_len, ref_seq, ref_off, ref_len, MA.jc_new(MA.JC_DIRECT, 0))


@njit(cache=True, nogil=True)
def map_one_post(ok, q, iv, fv, R, n, a, rep_len, ref_seq, ref_off, ref_len, jc):
    """The rest of mm_map_frag after map_one_pre: base alignment (with -c/-a; jc serves its ksw calls) and
    MAPQ.  Returns (R, n_regs, cigar buffer, rep_len)."""
    cig = np.zeros(16, np.uint32)
    if not ok:
        return R, 0, cig, 0
    if iv[I_FLAG] & MO.F_CIGAR:
        R, n, cig = _align(q, iv, fv, R, n, a, ref_seq, ref_off, ref_len, cig, jc)
    MH.set_mapq(R, n, iv[I_MIN_CHAIN_SCORE], iv[I_A], rep_len, (iv[I_FLAG] & MO.F_SR) != 0)
    return R, n, cig, rep_len


@njit(cache=True, nogil=True)
def _chain_params(iv, fv, is_sr, qlen_sum):
    """mm_map_frag's chaining gaps and penalties: (max_gap_qry, max_gap_ref, pen_gap, pen_skip)."""
    gq, gr = LC.chain_gaps(is_sr, qlen_sum, iv[I_MAX_GAP], iv[I_MAX_GAP_REF], iv[I_MAX_FRAG_LEN])
    pen_gap, pen_skip = LC.chain_pens(fv[F_CHAIN_GAP_SCALE], fv[F_CHAIN_SKIP_SCALE], iv[I_K])
    return gq, gr, pen_gap, pen_skip


@njit(cache=True, nogil=True)
def _chain(iv, is_rmq, max_gap_qry, max_gap_ref, pen_gap, pen_skip, n_segs, a):
    """mm_map_frag's first chaining of anchors a (sorted): RMQ or DP -> (anchors as chained, chains u)."""
    if is_rmq:
        return LC.lchain_rmq(iv[I_MAX_GAP], iv[I_RMQ_INNER_DIST], iv[I_BW], iv[I_MAX_CHAIN_SKIP], iv[I_RMQ_SIZE_CAP],
                             iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE], pen_gap, pen_skip, a)
    return LC.lchain_dp(max_gap_ref, max_gap_qry, iv[I_BW], iv[I_MAX_CHAIN_SKIP], iv[I_MAX_CHAIN_ITER],
                        iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE], pen_gap, pen_skip, False, n_segs, a)


@njit(cache=True, nogil=True)
def map_one_pre(q, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, dual_skip, diag_rid,
                pre, mv_p, a_p, rep_p, mini_p, fp_on, f_p, p_p):
    """mm_map_frag up to the base alignment: seeds, chains, regions, parents, error estimate.
    Returns (ok, R, n_regs, anchors, rep_len); ok False: the read is not mapped (empty or too long)."""
    flag = iv[I_FLAG]
    qlen = q.shape[0]
    R = np.zeros((0, NR), np.int64)
    if qlen == 0 or (iv[I_MAX_QLEN] > 0 and qlen > iv[I_MAX_QLEN]):
        return False, R, 0, np.zeros((0, 2), np.uint64), 0
    is_sr = (flag & MO.F_SR) != 0
    is_rmq = (flag & MO.F_RMQ) != 0
    hname = name if (flag & MO.F_NO_HASH_NAME) == 0 else name[:0]
    hsh = LC.read_hash(hname, qlen, iv[I_SEED])
    seg_off = np.zeros(2, np.int64)
    seg_off[1] = qlen
    if pre:
        mv, a, rep_len, mini_pos = mv_p, a_p, rep_p, mini_p
    else:
        mv, a, rep_len, mini_pos = seed_read(q, seg_off, iv[I_W], iv[I_K], iv[I_HPC] != 0, iv[I_MID_OCC],
                                             iv[I_MAX_MAX_OCC], iv[I_OCC_DIST], fv[F_Q_OCC_FRAC], flag, b,
                                             bkt_off, keys, key_off, pos, ref_len, diag_rid, dual_skip,
                                             iv[I_SDUST])
    max_gap = iv[I_MAX_GAP]
    max_gap_qry, max_gap_ref, pen_gap, pen_skip = _chain_params(iv, fv, is_sr, qlen)
    if fp_on and not is_rmq:
        a, u = LC.lchain_dp_fp(max_gap_ref, max_gap_qry, iv[I_BW], iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE], False, a,
                               f_p, p_p)
    else:
        a, u = _chain(iv, is_rmq, max_gap_qry, max_gap_ref, pen_gap, pen_skip, 1, a)
    if iv[I_BW_LONG] > iv[I_BW] and (flag & _NO_LJOIN_FLAGS) == 0 and u.shape[0] > 1:
        a, u, _ = LC.maybe_rechain_long(iv[I_BW], iv[I_BW_LONG], flag & _NO_LJOIN_FLAGS, 1, qlen,
                                        iv[I_RMQ_RESCUE_SIZE], fv[F_RMQ_RESCUE_RATIO], max_gap,
                                        iv[I_RMQ_INNER_DIST], iv[I_MAX_CHAIN_SKIP], iv[I_RMQ_SIZE_CAP],
                                        iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE], pen_gap, pen_skip, a, u)
    elif LC.need_occ_rechain(iv[I_MAX_OCC], iv[I_MID_OCC], rep_len, is_rmq, 1, a, u):
        a, rep_len, mini_pos = seed_hits(mv, qlen, iv[I_MAX_OCC], iv[I_MAX_MAX_OCC], iv[I_OCC_DIST], flag, b,
                                         bkt_off, keys, key_off, pos, ref_len, diag_rid, dual_skip)
        a, u = LC.lchain_dp(max_gap_ref, max_gap_qry, iv[I_BW], iv[I_MAX_CHAIN_SKIP], iv[I_MAX_CHAIN_ITER],
                            iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE], pen_gap, pen_skip, False, 1, a)
    is_qstrand = (flag & MO.F_QSTRAND) != 0
    R = LC.gen_regs(hsh, qlen, u, a, is_qstrand)
    n = R.shape[0]
    n = MH.chain_post((flag & MO.F_ALL_CHAINS) != 0, fv[F_MASK_LEVEL], iv[I_MASK_LEN], iv[I_A] * 2 + iv[I_B],
                      (flag & MO.F_HARD_MLEVEL) != 0, fv[F_ALT_DROP], fv[F_PRI_RATIO], iv[I_K], iv[I_BEST_N], max_gap,
                      1, seg_off[1:], max_gap_ref, R, n)
    if not is_sr and not is_qstrand:
        MH.est_err(qlen, R, n, a, mini_pos, ref_len)
        n = MH.filter_strand_retained(R, n)
    return True, R, n, a, rep_len


@njit(cache=True, nogil=True)
def _align(q, iv, fv, R, n, a, ref_seq, ref_off, ref_len, cig, jc):
    """map.c's align_regs: base-level alignment of every region, then parent/secondary selection."""
    flag = iv[I_FLAG]
    R, n, cig, _ = MA.align_skeleton(flag, iv[I_K], iv[I_HPC], iv[I_A], iv[I_B], iv[I_Q], iv[I_E], iv[I_Q2], iv[I_E2],
                                     iv[I_SC_AMBI], iv[I_ZDROP], iv[I_ZDROP_INV], iv[I_END_BONUS], iv[I_BW],
                                     iv[I_BW_LONG], iv[I_MAX_GAP], iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE],
                                     iv[I_MIN_DP_MAX], iv[I_MIN_KSW_LEN], fv[F_MAX_CLIP_RATIO], iv[I_RANK_MIN_LEN],
                                     fv[F_RANK_FRAC], fv[F_ALT_DROP], iv[I_MAX_SW_MAT], 0, ref_seq, ref_off, q, R, n,
                                     a, cig, 0, jc)
    if jc[0][0] == MA.JC_PLAN:
        return R, n, cig
    n = MH.align_post((flag & MO.F_ALL_CHAINS) != 0, fv[F_MASK_LEVEL], iv[I_MASK_LEN], iv[I_A] * 2 + iv[I_B],
                      (flag & MO.F_HARD_MLEVEL) != 0, fv[F_ALT_DROP], fv[F_PRI_RATIO], iv[I_K], iv[I_BEST_N],
                      iv[I_MAX_GAP], R, n)
    return R, n, cig


@njit(cache=True, nogil=True)
def map_range(lo, hi, seq, seq_off, raw, qual, qual_on, names, name_off, comments, com_off, iv, fv, b, bkt_off,
              keys, key_off, pos, ref_len, ref_seq, ref_off, ctg_names, ctg_noff, rg_id, dual_skip, diag_rids,
              pre, mv, mv_off, a, a_off, rep_len, mini_pos, mini_off, fp_on, f, p):
    """Map reads [lo, hi) of a batch and format their records; returns (bytes buffer, used length).
    pre: the batch's seeds in CSR form (SeedBatch of aligner/map/gpu/seed.py), else seeded per read.
    fp_on: f / p hold the batch's DP chaining scores and predecessors per anchor (rows as a)."""
    (seq, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, bkt_off, keys, key_off, pos, ref_len,
     ref_seq, ref_off, ctg_names, ctg_noff, rg_id, dual_skip, diag_rids, mv, mv_off, a, a_off, rep_len, mini_pos,
     mini_off, f, p) = unowned((seq, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, bkt_off, keys,
                                key_off, pos, ref_len, ref_seq, ref_off, ctg_names, ctg_noff, rg_id, dual_skip,
                                diag_rids, mv, mv_off, a, a_off, rep_len, mini_pos, mini_off, f, p))
    buf = np.empty(1 << 16, np.uint8)
    nb_ = 0
    flag = iv[I_FLAG]
    for i in range(lo, hi):
        s0 = seq_off[i]
        s1 = seq_off[i + 1]
        q = seq[s0:s1]
        name = names[name_off[i]:name_off[i + 1]]
        k = i if pre else 0
        R, n, cig, rl = map_one(q, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off,
                                dual_skip, diag_rids[i], pre, mv[mv_off[k]:mv_off[k + 1]], a[a_off[k]:a_off[k + 1]],
                                rep_len[k], mini_pos[mini_off[k]:mini_off[k + 1]], fp_on,
                                f[a_off[k]:a_off[k + 1]] if fp_on else f, p[a_off[k]:a_off[k + 1]] if fp_on else p)
        qq = qual[s0:s1] if qual_on else qual[:0]
        buf, nb_ = write_read(buf, nb_, flag, name, raw[s0:s1], qq, q, R, n, cig, rl, ref_seq, ref_off,
                              ctg_names, ctg_noff, ref_len, comments[com_off[i]:com_off[i + 1]], rg_id)
    return buf, nb_


# ------------------------------------------------------------------------------------------ fragments
@njit(cache=True, nogil=True)
def frag_flips(n_seg, pe_ori):
    """Which segments of a fragment are mapped reverse-complemented (worker_for: with two segments, the first when
    pe_ori bit 1 is set, the second when bit 0 is: -x sr's FR pairs turn the second read)."""
    out = np.zeros(n_seg, np.bool_)
    if n_seg == 2 and pe_ori >= 0:
        out[0] = (pe_ori >> 1) & 1 != 0
        out[1] = pe_ori & 1 != 0
    return out


@njit(cache=True, nogil=True)
def _append_cigars(cig, c, R, n):
    """cig with the CIGAR buffer c of regions R[:n] appended after it, their CIG_OFF moved along."""
    base = cig.shape[0]
    out = np.empty(base + c.shape[0], np.uint32)
    out[:base] = cig
    out[base:] = c
    for i in range(n):
        R[i, CIG_OFF] += base
    return out


@njit(cache=True, nogil=True)
def map_frag_pre(qc, seg_off, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, dual_skip, diag_rid):
    """map_frag up to the base alignment: the fragment's seeds and chains, its regions split per segment (seg_gen)
    with their parents set. Returns (ok, R_seg, s_off, a_cat, a_off, rep_len): segment s has the regions
    R_seg[s_off[s]:s_off[s+1]] and the anchors a_cat[a_off[s]:a_off[s+1]]; ok False: nothing to map (empty or
    too long)."""
    flag = iv[I_FLAG]
    n_segs = seg_off.shape[0] - 1
    qlens = seg_off[1:] - seg_off[:-1]
    qlen_sum = seg_off[n_segs] - seg_off[0]
    s_off = np.zeros(n_segs + 1, np.int64)
    if qlen_sum == 0 or (iv[I_MAX_QLEN] > 0 and qlen_sum > iv[I_MAX_QLEN]):
        return False, np.zeros((0, NR), np.int64), s_off, np.zeros((0, 2), np.uint64), s_off.copy(), 0
    is_sr = (flag & MO.F_SR) != 0
    is_rmq = (flag & MO.F_RMQ) != 0
    hname = name if (flag & MO.F_NO_HASH_NAME) == 0 else name[:0]
    hsh = LC.read_hash(hname, qlen_sum, iv[I_SEED])
    mv, a, rep_len, mini_pos = seed_read(qc, seg_off, iv[I_W], iv[I_K], iv[I_HPC] != 0, iv[I_MID_OCC],
                                         iv[I_MAX_MAX_OCC], iv[I_OCC_DIST], fv[F_Q_OCC_FRAC], flag, b, bkt_off, keys,
                                         key_off, pos, ref_len, diag_rid, dual_skip, iv[I_SDUST])
    max_gap = iv[I_MAX_GAP]
    max_gap_qry, max_gap_ref, pen_gap, pen_skip = _chain_params(iv, fv, is_sr, qlen_sum)
    a, u = _chain(iv, is_rmq, max_gap_qry, max_gap_ref, pen_gap, pen_skip, n_segs, a)
    if LC.need_occ_rechain(iv[I_MAX_OCC], iv[I_MID_OCC], rep_len, is_rmq, n_segs, a, u):
        a, rep_len, mini_pos = seed_hits(mv, qlen_sum, iv[I_MAX_OCC], iv[I_MAX_MAX_OCC], iv[I_OCC_DIST], flag, b,
                                         bkt_off, keys, key_off, pos, ref_len, diag_rid, dual_skip)
        a, u = LC.lchain_dp(max_gap_ref, max_gap_qry, iv[I_BW], iv[I_MAX_CHAIN_SKIP], iv[I_MAX_CHAIN_ITER],
                            iv[I_MIN_CNT], iv[I_MIN_CHAIN_SCORE], pen_gap, pen_skip, False, n_segs, a)
    is_qstrand = (flag & MO.F_QSTRAND) != 0
    R0 = LC.gen_regs(hsh, qlen_sum, u, a, is_qstrand)
    n0 = R0.shape[0]
    sub_diff = iv[I_A] * 2 + iv[I_B]
    n0 = MH.chain_post((flag & MO.F_ALL_CHAINS) != 0, fv[F_MASK_LEVEL], iv[I_MASK_LEN], sub_diff,
                       (flag & MO.F_HARD_MLEVEL) != 0, fv[F_ALT_DROP], fv[F_PRI_RATIO], iv[I_K], iv[I_BEST_N], max_gap,
                       n_segs, qlens, max_gap_ref, R0, n0)
    if not is_sr and not is_qstrand:
        MH.est_err(qlen_sum, R0, n0, a, mini_pos, ref_len)
        n0 = MH.filter_strand_retained(R0, n0)
    a_cat, a_off, R_seg, s_off = LC.seg_gen(hsh, qlens, R0, n0, a)
    for s in range(n_segs):  # (each segment's rows in place: the segments' slices do not overlap)
        MH.set_parent(fv[F_MASK_LEVEL], iv[I_MASK_LEN], R_seg[s_off[s]:s_off[s + 1]], s_off[s + 1] - s_off[s],
                      sub_diff, (flag & MO.F_HARD_MLEVEL) != 0, fv[F_ALT_DROP])
    return True, R_seg, s_off, a_cat, a_off, rep_len


@njit(cache=True, nogil=True)
def _frag_pair(iv, fv, qlens, Rs, ns):
    """mm_map_frag's end for a fragment whose segments are aligned: mm_pair of two segments (-a/-c)."""
    flag = iv[I_FLAG]
    if qlens.shape[0] == 2 and iv[I_PE_ORI] >= 0 and (flag & MO.F_CIGAR):
        max_gap_qry, max_gap_ref, pen_gap, pen_skip = _chain_params(iv, fv, (flag & MO.F_SR) != 0, qlens.sum())
        MH.pair_regs(max_gap_ref, iv[I_PE_BONUS], iv[I_A] * 2 + iv[I_B], iv[I_A], qlens, Rs[0], ns[0], Rs[1], ns[1])


@njit(cache=True, nogil=True)
def _frag_cat(Rs, ns):
    """The segments' regions back to back, and their offsets."""
    n_segs = ns.shape[0]
    r_off = np.zeros(n_segs + 1, np.int64)
    for s in range(n_segs):
        r_off[s + 1] = r_off[s] + ns[s]
    R_cat = np.empty((r_off[n_segs], NR), np.int64)
    for s in range(n_segs):
        R_cat[r_off[s]:r_off[s + 1]] = Rs[s][:ns[s]]
    return R_cat, r_off


@njit(cache=True, nogil=True)
def map_frag(qc, seg_off, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off, dual_skip, diag_rid):
    """mm_map_frag for a fragment of two or more segments mapped together (minimap2's fragment mode: -x sr pairs,
    --frag=yes): qc holds the segments' codes back to back (those frag_flips names already reverse-complemented),
    segment s at seg_off[s]:seg_off[s+1]; name is the first segment's. Seeds of all segments chain together (a
    chain may join the mates), the chains are split per segment (seg_gen), each segment's regions are aligned on
    their own, then the two segments are paired (mm_pair). Returns (R_cat, r_off, cigar buffer, rep_len): segment s
    has the regions R_cat[r_off[s]:r_off[s+1]], in the coordinates of the sequence as mapped. (The staged path
    runs the same steps as map_frag_plan and map_frag_finish.)"""
    flag = iv[I_FLAG]
    n_segs = seg_off.shape[0] - 1
    qlens = seg_off[1:] - seg_off[:-1]
    cig = np.zeros(16, np.uint32)
    ok, R_seg, s_off, a_cat, a_off, rep_len = map_frag_pre(qc, seg_off, name, iv, fv, b, bkt_off, keys, key_off,
                                                           pos, ref_len, dual_skip, diag_rid)
    if not ok:
        return np.zeros((0, NR), np.int64), np.zeros(n_segs + 1, np.int64), cig, 0
    is_sr = (flag & MO.F_SR) != 0
    jc = MA.jc_new(MA.JC_DIRECT, 0)
    Rs = []
    ns = np.zeros(n_segs, np.int64)
    for s in range(n_segs):
        R = R_seg[s_off[s]:s_off[s + 1]].copy()
        n = R.shape[0]
        if flag & MO.F_CIGAR:  # (align_skeleton fills a CIGAR buffer from its start: one per segment, appended)
            R, n, c = _align(qc[seg_off[s]:seg_off[s + 1]], iv, fv, R, n, a_cat[a_off[s]:a_off[s + 1]], ref_seq,
                             ref_off, ref_len, np.zeros(16, np.uint32), jc)
            cig = _append_cigars(cig, c, R, n)
        MH.set_mapq(R, n, iv[I_MIN_CHAIN_SCORE], iv[I_A], rep_len, is_sr)
        Rs.append(R)
        ns[s] = n
    _frag_pair(iv, fv, qlens, Rs, ns)
    R_cat, r_off = _frag_cat(Rs, ns)
    return R_cat, r_off, cig, rep_len


@njit(cache=True, nogil=True)
def _rc_into(src, dst, d1):
    """dst[d1 - len(src):d1] = the reverse complement of codes src (N stays N)."""
    for i in range(src.shape[0]):
        c = src[i]
        dst[d1 - 1 - i] = 3 - c if c < 4 else 4


@njit(cache=True, nogil=True)
def _flip_back(R_cat, ro, so, flips):
    """Regions of a fragment's flipped segments (frag_flips) back to the strand and coordinates of the read as
    given: segment s's rows ro[s]:ro[s + 1], its length so[s + 1] - so[s]."""
    for s in range(flips.shape[0]):
        if flips[s]:
            ql = so[s + 1] - so[s]
            for i in range(ro[s], ro[s + 1]):
                t = R_cat[i, QS]
                R_cat[i, QS] = ql - R_cat[i, QE]
                R_cat[i, QE] = ql - t
                R_cat[i, REV] = 1 - R_cat[i, REV]


@njit(cache=True, nogil=True)
def map_frag_range(flo, fhi, frag_off, seq, seq_off, raw, qual, qual_on, names, name_off, comments, com_off, iv, fv,
                   b, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off, ctg_names, ctg_noff, rg_id, dual_skip,
                   diag_rids):
    """Map fragments [flo, fhi) of a batch (fragment f = reads frag_off[f]:frag_off[f+1], consecutive records whose
    names agree but for a /DIGIT end) and format their records; returns (bytes buffer, used length). A fragment of
    one read is mapped as map_range maps it; one of several as minimap2's fragment mode does (map_frag, or each
    segment alone with --no-pairing), its records carrying the mates' fields."""
    (seq, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, bkt_off, keys, key_off, pos, ref_len,
     ref_seq, ref_off, ctg_names, ctg_noff, rg_id, dual_skip, diag_rids) = unowned(
        (seq, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, bkt_off, keys, key_off, pos, ref_len,
         ref_seq, ref_off, ctg_names, ctg_noff, rg_id, dual_skip, diag_rids))
    buf = np.empty(1 << 16, np.uint8)
    nb_ = 0
    flag = iv[I_FLAG]
    no_seeds = np.zeros((0, 2), np.uint64)
    no_mini = np.zeros(0, np.uint64)
    no_f = np.zeros(0, np.int64)
    for f in range(flo, fhi):
        r0, r1 = frag_off[f], frag_off[f + 1]
        if r1 - r0 == 1:
            s0, s1 = seq_off[r0], seq_off[r0 + 1]
            q = seq[s0:s1]
            name = names[name_off[r0]:name_off[r0 + 1]]
            R, n, cig, rl = map_one(q, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off,
                                    dual_skip, diag_rids[r0], False, no_seeds, no_seeds, 0, no_mini,
                                    False, no_f, no_f)
            buf, nb_ = write_read(buf, nb_, flag, name, raw[s0:s1], qual[s0:s1] if qual_on else qual[:0], q, R, n,
                                  cig, rl, ref_seq, ref_off, ctg_names, ctg_noff, ref_len,
                                  comments[com_off[r0]:com_off[r0 + 1]], rg_id)
            continue
        n_seg = r1 - r0
        flips = frag_flips(n_seg, iv[I_PE_ORI])
        so = seq_off[r0:r1 + 1] - seq_off[r0]
        qc = seq[seq_off[r0]:seq_off[r1]].copy()
        for s in range(n_seg):
            if flips[s]:
                _rc_into(seq[seq_off[r0] + so[s]:seq_off[r0] + so[s + 1]], qc, so[s + 1])
        if flag & MO.F_INDEPEND_SEG:  # --no-pairing: each segment mapped alone, written as a fragment
            r_off = np.zeros(n_seg + 1, np.int64)
            parts = []
            cig = np.zeros(16, np.uint32)
            rls = np.zeros(n_seg, np.int64)
            for s in range(n_seg):
                nm = names[name_off[r0 + s]:name_off[r0 + s + 1]]
                R, n, c, rls[s] = map_one(qc[so[s]:so[s + 1]], nm, iv, fv, b, bkt_off, keys, key_off, pos, ref_len,
                                      ref_seq, ref_off, dual_skip, diag_rids[r0 + s], False, no_seeds, no_seeds, 0,
                                      no_mini, False, no_f, no_f)
                cig = _append_cigars(cig, c, R, n)
                parts.append(R[:n].copy())
                r_off[s + 1] = r_off[s] + n
            R_cat = np.empty((r_off[n_seg], NR), np.int64)
            for s in range(n_seg):
                R_cat[r_off[s]:r_off[s + 1]] = parts[s]
        else:
            R_cat, r_off, cig, rl = map_frag(qc, so, names[name_off[r0]:name_off[r0 + 1]], iv, fv, b, bkt_off, keys,
                                             key_off, pos, ref_len, ref_seq, ref_off, dual_skip, diag_rids[r0])
            rls = np.full(n_seg, rl, np.int64)
        _flip_back(R_cat, r_off, so, flips)
        s0 = seq_off[r0]
        buf, nb_ = write_frag(buf, nb_, flag, names[name_off[r0]:name_off[r1]], name_off[r0:r1 + 1] - name_off[r0],
                              raw[s0:seq_off[r1]], qual[s0:seq_off[r1]] if qual_on else qual[:0],
                              seq[s0:seq_off[r1]], so, R_cat, r_off, cig, rls, ref_seq, ref_off, ctg_names, ctg_noff,
                              ref_len, comments[com_off[r0]:com_off[r1]], com_off[r0:r1 + 1] - com_off[r0], rg_id)
    return buf, nb_


@njit(cache=True, nogil=True)
def frag_codes(seq, seq_off, frag_off, pe_ori):
    """The batch's codes with each fragment's segments as map_frag maps them: those frag_flips names
    reverse-complemented (the staged fragment path's ksw2 jobs read their queries from this buffer)."""
    qc = seq.copy()
    for f in range(frag_off.shape[0] - 1):
        r0, r1 = frag_off[f], frag_off[f + 1]
        if r1 - r0 < 2:
            continue
        flips = frag_flips(r1 - r0, pe_ori)
        for s in range(r1 - r0):
            if flips[s]:
                _rc_into(seq[seq_off[r0 + s]:seq_off[r0 + s + 1]], qc, seq_off[r0 + s + 1])
    return qc


@njit(cache=True, nogil=True)
def _plan_arrays(nr):
    """A plan's arrays for nr reads (map_range_plan, map_frag_plan; _put_read and _plan_keys grow them): regions and
    their offsets, anchors and theirs, per-read (ok, rep_len), job keys and their offsets."""
    return (np.empty((max(16, 2 * nr), NR), np.int64), np.zeros(nr + 1, np.int64),
            np.empty((max(64, 16 * nr), 2), np.uint64), np.zeros(nr + 1, np.int64), np.zeros((nr, 2), np.int64),
            np.empty((max(16, 4 * nr), MA.KJ), np.int64), np.zeros(nr + 1, np.int64))


@njit(cache=True, nogil=True)
def _put_read(Rs, r_off, As, a_off2, st, j, ok, rl, R, n, aa):
    """A plan's row for read j (map_range_plan, map_frag_plan): its state (ok, rep_len), regions R[:n] after
    r_off[j] and anchors aa after a_off2[j] (r_off[j + 1], a_off2[j + 1] set) -> (Rs, As), grown as needed."""
    st[j, 0] = 1 if ok else 0
    st[j, 1] = rl
    Rs = _grow_rows(Rs, r_off[j], n)
    Rs[r_off[j]:r_off[j] + n] = R[:n]
    r_off[j + 1] = r_off[j] + n
    As = _grow_rows(As, a_off2[j], aa.shape[0])
    As[a_off2[j]:a_off2[j] + aa.shape[0]] = aa
    a_off2[j + 1] = a_off2[j] + aa.shape[0]
    return Rs, As


@njit(cache=True, nogil=True)
def _plan_keys(q, iv, fv, R, n, aa, ref_seq, ref_off, ref_len, K, k_off, j):
    """The ksw calls the base alignment of regions R[:n] (anchors aa) of read j would make (JC_PLAN, on copies),
    appended to K after k_off[j] -> (K, k_off[j + 1] set)."""
    k_off[j + 1] = k_off[j]
    if n == 0:
        return K
    cap = 4
    for r in range(n):
        cap += R[r, CNT] + 2
    jc = MA.jc_new(MA.JC_PLAN, cap)
    _align(q, iv, fv, R[:n].copy(), n, aa.copy(), ref_seq, ref_off, ref_len, np.zeros(16, np.uint32), jc)
    nk = jc[0][2]
    K = _grow_rows(K, k_off[j], nk)
    K[k_off[j]:k_off[j] + nk] = jc[1][:nk]
    k_off[j + 1] = k_off[j] + nk
    return K


@njit(cache=True, nogil=True)
def map_frag_plan(flo, fhi, frag_off, qc, seq_off, names, name_off, iv, fv, b, bkt_off, keys, key_off, pos, ref_len,
                  ref_seq, ref_off, dual_skip, diag_rids):
    """The staged fragment path's first half for fragments [flo, fhi) of a batch (map_frag_range's fragments, their
    codes as frag_codes turns them): each fragment's seeds, chains and regions per segment (map_frag_pre; a fragment
    of one read: map_one_pre), then the ksw calls of every segment's base alignment (JC_PLAN). Per read of the range,
    as map_range_plan returns them: (regions, their offsets, anchors, their offsets, (ok, rep_len), job keys, their
    offsets); map_frag_finish takes them back."""
    (qc, seq_off, names, name_off, iv, fv, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off, dual_skip,
     diag_rids) = unowned((qc, seq_off, names, name_off, iv, fv, bkt_off, keys, key_off, pos, ref_len, ref_seq,
                           ref_off, dual_skip, diag_rids))
    lo, hi = frag_off[flo], frag_off[fhi]
    nr = hi - lo
    flag = iv[I_FLAG]
    Rs, r_off, As, a_off2, st, K, k_off = _plan_arrays(nr)
    no_seeds = np.zeros((0, 2), np.uint64)
    no_mini = np.zeros(0, np.uint64)
    no_f = np.zeros(0, np.int64)
    cigar = (flag & MO.F_CIGAR) != 0
    for f in range(flo, fhi):
        r0, r1 = frag_off[f], frag_off[f + 1]
        if r1 - r0 == 1:
            j = r0 - lo
            q = qc[seq_off[r0]:seq_off[r0 + 1]]
            ok, R, n, aa, rl = map_one_pre(q, names[name_off[r0]:name_off[r0 + 1]], iv, fv, b, bkt_off, keys, key_off,
                                           pos, ref_len, dual_skip, diag_rids[r0], False, no_seeds, no_seeds, 0,
                                           no_mini, False, no_f, no_f)
            Rs, As = _put_read(Rs, r_off, As, a_off2, st, j, ok, rl, R, n, aa)
            K = _plan_keys(q, iv, fv, R, n if ok and cigar else 0, aa, ref_seq, ref_off, ref_len, K, k_off, j)
            continue
        so = seq_off[r0:r1 + 1] - seq_off[r0]
        fq = qc[seq_off[r0]:seq_off[r1]]
        ok, R_seg, s_off, a_cat, a_off, rl = map_frag_pre(fq, so, names[name_off[r0]:name_off[r0 + 1]], iv, fv, b,
                                                          bkt_off, keys, key_off, pos, ref_len, dual_skip,
                                                          diag_rids[r0])
        for s in range(r1 - r0):
            j = r0 + s - lo
            R = R_seg[s_off[s]:s_off[s + 1]]
            n = R.shape[0]
            aa = a_cat[a_off[s]:a_off[s + 1]]
            Rs, As = _put_read(Rs, r_off, As, a_off2, st, j, ok, rl, R, n, aa)
            K = _plan_keys(fq[so[s]:so[s + 1]], iv, fv, R, n if ok and cigar else 0, aa, ref_seq, ref_off, ref_len,
                           K, k_off, j)
    return Rs[:r_off[nr]], r_off, As[:a_off2[nr]], a_off2, st, K[:k_off[nr]], k_off


@njit(cache=True, nogil=True)
def map_frag_finish(flo, fhi, frag_off, seq, qc, seq_off, raw, qual, qual_on, names, name_off, comments, com_off, iv,
                    fv, ref_len, ref_seq, ref_off, ctg_names, ctg_noff, rg_id, Rs, r_off, As, a_off2, st, K, k_off,
                    pez, pcig, pcig_off, pn_cig):
    """The staged fragment path's second half: each segment's base alignment from map_frag_plan's arrays, its ksw
    calls served from the batch's results (JC_REPLAY), MAPQ, the pairing, and the records, as map_frag_range
    writes them. Returns (bytes buffer, used length)."""
    (seq, qc, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, ref_len, ref_seq, ref_off, ctg_names,
     ctg_noff, rg_id, Rs, r_off, As, a_off2, st, K, k_off, pez, pcig, pcig_off, pn_cig) = unowned(
        (seq, qc, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, ref_len, ref_seq, ref_off, ctg_names,
         ctg_noff, rg_id, Rs, r_off, As, a_off2, st, K, k_off, pez, pcig, pcig_off, pn_cig))
    buf = np.empty(1 << 16, np.uint8)
    nb_ = 0
    flag = iv[I_FLAG]
    is_sr = (flag & MO.F_SR) != 0
    lo = frag_off[flo]
    for f in range(flo, fhi):
        r0, r1 = frag_off[f], frag_off[f + 1]
        n_seg = r1 - r0
        cig = np.zeros(16, np.uint32)
        rl = 0
        Rl = []
        ns = np.zeros(n_seg, np.int64)
        for s in range(n_seg):
            j = r0 + s - lo
            R = Rs[r_off[j]:r_off[j + 1]].copy()
            aa = As[a_off2[j]:a_off2[j + 1]].copy()
            n = R.shape[0]
            ctl = np.zeros(4, np.int64)
            ctl[0] = MA.JC_REPLAY
            ctl[2] = k_off[j + 1] - k_off[j]
            jc = (ctl, K[k_off[j]:k_off[j + 1]], pez[k_off[j]:k_off[j + 1]], pcig, pcig_off[k_off[j]:k_off[j + 1]],
                  pn_cig[k_off[j]:k_off[j + 1]])
            q = qc[seq_off[r0 + s]:seq_off[r0 + s + 1]]
            if n_seg == 1:
                R, n, cig, rl = map_one_post(st[j, 0] != 0, q, iv, fv, R, n, aa, st[j, 1], ref_seq, ref_off, ref_len,
                                             jc)
            else:
                if st[j, 0] != 0 and (flag & MO.F_CIGAR):
                    R, n, c = _align(q, iv, fv, R, n, aa, ref_seq, ref_off, ref_len, np.zeros(16, np.uint32), jc)
                    cig = _append_cigars(cig, c, R, n)
                if st[j, 0] != 0:
                    MH.set_mapq(R, n, iv[I_MIN_CHAIN_SCORE], iv[I_A], st[j, 1], is_sr)
            Rl.append(R)
            ns[s] = n
        s0 = seq_off[r0]
        if n_seg == 1:
            buf, nb_ = write_read(buf, nb_, flag, names[name_off[r0]:name_off[r0 + 1]], raw[s0:seq_off[r1]],
                                  qual[s0:seq_off[r1]] if qual_on else qual[:0], seq[s0:seq_off[r1]], Rl[0], ns[0],
                                  cig, rl, ref_seq, ref_off, ctg_names, ctg_noff, ref_len,
                                  comments[com_off[r0]:com_off[r0 + 1]], rg_id)
            continue
        ok = st[r0 - lo, 0] != 0
        rls = np.full(n_seg, st[r0 - lo, 1] if ok else 0, np.int64)
        if ok:
            _frag_pair(iv, fv, seq_off[r0 + 1:r1 + 1] - seq_off[r0:r1], Rl, ns)
            R_cat, ro = _frag_cat(Rl, ns)
        else:
            R_cat, ro = np.zeros((0, NR), np.int64), np.zeros(n_seg + 1, np.int64)
        so = seq_off[r0:r1 + 1] - seq_off[r0]
        _flip_back(R_cat, ro, so, frag_flips(n_seg, iv[I_PE_ORI]))
        buf, nb_ = write_frag(buf, nb_, flag, names[name_off[r0]:name_off[r1]], name_off[r0:r1 + 1] - name_off[r0],
                              raw[s0:seq_off[r1]], qual[s0:seq_off[r1]] if qual_on else qual[:0],
                              seq[s0:seq_off[r1]], so, R_cat, ro, cig, rls, ref_seq, ref_off, ctg_names, ctg_noff,
                              ref_len, comments[com_off[r0]:com_off[r1]], com_off[r0:r1 + 1] - com_off[r0], rg_id)
    return buf, nb_


@njit(cache=True, nogil=True)
def _grow_rows(arr, used, need):
    """arr with room for `need` more rows after `used` (doubling; content kept)."""
    if used + need <= arr.shape[0]:
        return arr
    n = max(2 * arr.shape[0], used + need)
    out = np.empty((n, arr.shape[1]), arr.dtype)
    out[:used] = arr[:used]
    return out


@njit(cache=True, nogil=True)
def map_range_plan(lo, hi, seq, seq_off, names, name_off, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, ref_seq,
                   ref_off, dual_skip, diag_rids, pre, mv, mv_off, a, a_off, rep_len, mini_pos, mini_off, fp_on, f, p):
    """The staged path's first half for reads [lo, hi): map_one_pre of every read, then its base alignment in
    JC_PLAN mode (on copies), which records the keys of the ksw calls it would make. Returns the range's
    (regions rows, their offsets per read, anchors, their offsets, per-read (ok, rep_len), job keys and
    their offsets per read); map_range_finish takes them back."""
    (seq, seq_off, names, name_off, iv, fv, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off, dual_skip,
     diag_rids, mv, mv_off, a, a_off, rep_len, mini_pos, mini_off, f, p) = unowned(
        (seq, seq_off, names, name_off, iv, fv, bkt_off, keys, key_off, pos, ref_len, ref_seq, ref_off, dual_skip,
         diag_rids, mv, mv_off, a, a_off, rep_len, mini_pos, mini_off, f, p))
    nr = hi - lo
    flag = iv[I_FLAG]
    Rs, r_off, As, a_off2, st, K, k_off = _plan_arrays(nr)
    cigar = (flag & MO.F_CIGAR) != 0
    for i in range(lo, hi):
        j = i - lo
        q = seq[seq_off[i]:seq_off[i + 1]]
        name = names[name_off[i]:name_off[i + 1]]
        k = i if pre else 0
        ok, R, n, aa, rl = map_one_pre(q, name, iv, fv, b, bkt_off, keys, key_off, pos, ref_len, dual_skip,
                                       diag_rids[i], pre, mv[mv_off[k]:mv_off[k + 1]], a[a_off[k]:a_off[k + 1]],
                                       rep_len[k], mini_pos[mini_off[k]:mini_off[k + 1]], fp_on,
                                       f[a_off[k]:a_off[k + 1]] if fp_on else f,
                                       p[a_off[k]:a_off[k + 1]] if fp_on else p)
        Rs, As = _put_read(Rs, r_off, As, a_off2, st, j, ok, rl, R, n, aa)
        K = _plan_keys(q, iv, fv, R, n if ok and cigar else 0, aa, ref_seq, ref_off, ref_len, K, k_off, j)
    return Rs[:r_off[nr]], r_off, As[:a_off2[nr]], a_off2, st, K[:k_off[nr]], k_off


@njit(cache=True, nogil=True)
def map_range_finish(lo, hi, seq, seq_off, raw, qual, qual_on, names, name_off, comments, com_off, iv, fv, ref_len,
                     ref_seq, ref_off, ctg_names, ctg_noff, rg_id, Rs, r_off, As, a_off2, st, K, k_off, pez, pcig,
                     pcig_off, pn_cig):
    """The staged path's second half: map_one_post of reads [lo, hi) from map_range_plan's arrays, their ksw
    calls served from the batch's results (pez/pcig/pcig_off/pn_cig: one row per key of K, see
    aligner/map/align.py JC_REPLAY), and their records. Returns (bytes buffer, used length) as map_range."""
    (seq, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, ref_len, ref_seq, ref_off, ctg_names,
     ctg_noff, rg_id, Rs, r_off, As, a_off2, st, K, k_off, pez, pcig, pcig_off, pn_cig) = unowned(
        (seq, seq_off, raw, qual, names, name_off, comments, com_off, iv, fv, ref_len, ref_seq, ref_off, ctg_names,
         ctg_noff, rg_id, Rs, r_off, As, a_off2, st, K, k_off, pez, pcig, pcig_off, pn_cig))
    buf = np.empty(1 << 16, np.uint8)
    nb_ = 0
    flag = iv[I_FLAG]
    for i in range(lo, hi):
        j = i - lo
        s0 = seq_off[i]
        s1 = seq_off[i + 1]
        q = seq[s0:s1]
        name = names[name_off[i]:name_off[i + 1]]
        R = Rs[r_off[j]:r_off[j + 1]].copy()
        aa = As[a_off2[j]:a_off2[j + 1]].copy()
        k0 = k_off[j]
        k1 = k_off[j + 1]
        ctl = np.zeros(4, np.int64)
        ctl[0] = MA.JC_REPLAY
        ctl[2] = k1 - k0
        jc = (ctl, K[k0:k1], pez[k0:k1], pcig, pcig_off[k0:k1], pn_cig[k0:k1])
        R, n, cig, rl = map_one_post(st[j, 0] != 0, q, iv, fv, R, R.shape[0], aa, st[j, 1], ref_seq, ref_off,
                                     ref_len, jc)
        qq = qual[s0:s1] if qual_on else qual[:0]
        buf, nb_ = write_read(buf, nb_, flag, name, raw[s0:s1], qq, q, R, n, cig, rl, ref_seq, ref_off,
                              ctg_names, ctg_noff, ref_len, comments[com_off[i]:com_off[i + 1]], rg_id)
    return buf, nb_


# ----------------------------------------------------------------------------------------------- host side
def _cat_strings(strs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    enc = [s.encode("utf-8", "surrogateescape") for s in strs]
    off = np.zeros(len(enc) + 1, np.int64)
    if enc:
        np.cumsum([len(e) for e in enc], out=off[1:])
    return np.frombuffer(b"".join(enc), np.uint8).copy(), off


def _ranges(seq_off: np.ndarray, n_threads: int) -> list[tuple[int, int]]:
    """About 4 read ranges per thread of similar base counts (io/reads.base_ranges)."""
    return base_ranges(seq_off, seq_off.shape[0] - 1, 4 * n_threads if n_threads > 1 else 1)


class MapAligner:
    """A minimizer index plus options; `map_batch(batch)` -> the batch's PAF/SAM bytes."""

    def __init__(self, idx, opt: MO.MapOpt, device: str = "cpu", batch_seed: bool | None = None,
                 batch_chain: bool | None = None, batch_align: bool | None = None, stage_frags: bool | None = None):
        """device "gpu": each batch is sketched, seeded and DP-chained (scores) on the GPU (aligner/
        mmsketch_gpu.py, aligner/map/gpu/seed.py, aligner/map/gpu/lchain.py), and with batch_align (-c/-a) its ksw2
        extensions and gap fills run as one batch of GPU jobs (aligner/map/align_batch.py); the rest runs on the CPU.
        batch_seed (default: device == "gpu") with device "cpu" runs the same batch stages through the CPU
        twins (the GPU path's oracle); batch_chain (default: batch_seed) the batch DP chaining scores;
        batch_align (default: on with device "gpu" unless opt.gpu_align is False (--cpu-align); with batch
        seeding on the CPU only when opt.gpu_align is True) the staged base alignment. On chr20 pbsim CLR reads
        it makes the whole GPU run 2.3x faster than aligning per read on 16 CPU threads; on the small E. coli
        sets it is about even (docs/BENCHMARKS.md's git history). stage_frags (default: batch_align): fragment
        mode's base alignment staged too (_map_frags_staged; on the 3.1 Gbp stand-in's 1M pairs it took -ax sr's
        mapping phase on an H200 from 13.9-15.3 s on 16 CPU threads to 9.7 s)."""
        self.idx = idx
        self.opt = opt
        self.device = device
        self.batch_seed = device == "gpu" if batch_seed is None else batch_seed
        self.batch_chain = self.batch_seed if batch_chain is None else (batch_chain and self.batch_seed)
        if opt.flag & MO.F_RMQ:
            self.batch_chain = False  # RMQ chaining runs per read
        if batch_align is None:  # --gpu-align / --cpu-align, else on when the batch is on the GPU
            batch_align = self.batch_seed and (device == "gpu" if opt.gpu_align is None else opt.gpu_align)
        self.batch_align = batch_align and bool(opt.flag & MO.F_CIGAR)
        # fragment mode's base alignment as a batch of ksw2 jobs too (_map_frags_staged), with the staged alignment
        self.stage_frags = self.batch_align and (True if stage_frags is None else stage_frags)
        self.ext_stats: dict = {}
        self.stage_times: dict = {}
        self._dev_ready = False
        # the device set-up left to the first batch that needs it (device_setup from _batch_stages) instead of
        # run_map's start: map's CLI sets it for fragment mode on two files in lockstep, whose fragments of two
        # reads are mapped on the CPU threads (_map_frags) and need nothing on the GPU
        self.defer_device = False
        self._lock = threading.Lock()  # ext_stats / the lazy device arrays, from worker threads (stage times: lap)
        self._idx_dev = None
        self._ref_dev = None
        self.iv, self.fv = pack_opts(opt)
        ref = idx.ref
        self.ref_len = np.asarray(ref.lengths, np.int64)
        self.ctg_names, self.ctg_noff = _cat_strings(list(ref.names))
        self.rg_id = np.frombuffer(_rg_id(opt.rg).encode(), np.uint8).copy()
        self._name2rid: dict[str, int] | None = None
        self.dual_skip = np.zeros(0, np.uint8)

    def _diag_rids(self, batch) -> np.ndarray:
        """Per read: the contig of the same name and length for -D (self mapping), else -1."""
        d = np.full(batch.n, -1, np.int64)
        if self.opt.flag & (MO.F_NO_DIAG | MO.F_NO_DUAL):
            if self._name2rid is None:
                self._name2rid = {}
                for i, nm in enumerate(self.idx.ref.names):
                    self._name2rid.setdefault(nm, i)
            lens = batch.lengths
            for i, nm in enumerate(batch.names):
                r = self._name2rid.get(nm, -1)
                if r >= 0 and int(self.ref_len[r]) == int(lens[i]):
                    d[i] = r
        return d

    def device_setup(self) -> None:
        """With the GPU: the index (batch seeding) and the reference (batch alignment) on the device and the
        kernel modules loaded, once, by the first caller (run_map calls it before its part workers start,
        _batch_stages for direct callers of map_batch / batch_jobs)."""
        built = self.idx.extra.pop("device", None)  # the arrays of an index built on this GPU (mmgpu), if it was
        if self.device != "gpu" or not (self.batch_seed or self.batch_align) or self._dev_ready:
            return
        import cupy as cp

        from g3align.aligner.map.gpu import seed as SG
        from g3align.kernels.loader import get_module
        with self._lock:
            if self._dev_ready:
                return
            if self.batch_seed:
                self._idx_dev = built if built is not None else SG.index_to_device(*self.idx.arrays())[1:5]
                get_module("mmseed")
                get_module("mmsketch", {"MM_K": int(self.iv[I_K]), "MM_W": int(self.iv[I_W]),
                                        "MM_HPC": int(self.iv[I_HPC] != 0)})
            if self.batch_align and self._ref_dev is None:  # (None unless _align_setup uploaded it already)
                self._ref_dev = cp.asarray(self.idx.ref.ref_seq)
            if self.batch_chain:
                get_module("lchain")
            if self.batch_align:
                get_module("ksw2")
            cp.cuda.Device().synchronize()
            self._dev_ready = True

    def preload(self) -> threading.Thread | None:
        """With the staged GPU path: the cached code of the kernels the part workers and the pool call first,
        in that order, loaded on a thread started now (nbshare.preload) instead of at their first calls. On a
        fresh H100 box the first part's workers stopped all 16 pool threads 2.9 s for map_range_plan and 2.4 s
        for map_range_finish (a trace of that run: 17.5 MB of cached code in mmpipeline)."""
        if self.device != "gpu" or not self.batch_align:
            return None
        from g3align.aligner.map.gpu import lchain as LG
        from g3align.aligner.map.ksw2 import gen_simple_mat
        from g3align.aligner.runtime.nbshare import preload_thread
        return preload_thread([LG.limits_batch, LC.chain_pens, _u_to_t, map_range_plan, gen_simple_mat,
                               map_range_finish])

    def worker_init(self) -> None:
        """Run by each part worker thread once: with the GPU, two CUDA streams of its own (non-blocking). Its own
        stream, made current, has the device's highest priority and runs its seeding and chaining kernels; its ksw2
        batches run on the second (default priority; _map_staged). On chr20 pbsim CLR (H100) the second stream took
        the mapping phase from 1.99 to 1.91 s and from 1.81 to 1.72 s (medians of 4 interleaved runs, two
        measurements), and the worker's own stream current instead of CuPy's null stream from 1.72 to 1.68 s (4 runs
        each), with pinned.drain from 1.67 to 1.54 s (3 runs each; docs/BENCHMARKS.md's git history). With
        defer_device nothing (a batch that needs the GPU then runs on CuPy's current stream)."""
        if self.device == "gpu" and (self.batch_seed or self.batch_align) and not self.defer_device:
            import cupy as cp

            from g3align.aligner.gpu.pinned import reserve_pool
            # non-blocking (flag 1), priority -100: CUDA clamps it to the device's highest; it lives as long as the
            # process (CuPy 14 calls ExternalStream deprecated, in favour of the stream protocol)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                _WORKER.stream = cp.cuda.ExternalStream(cp.cuda.runtime.streamCreateWithPriority(1, -100))
            _WORKER.ksw2_stream = cp.cuda.Stream(non_blocking=True)
            reserve_pool(_WORKER.ksw2_stream, MAP_POOL_RESERVE, 2 * max(1, MAP_DEPTH))
            reserve_pool(_WORKER.stream, MAP_POOL_RESERVE, 2 * max(1, MAP_DEPTH))
            _WORKER.stream.use()

    def map_batch(self, batch, n_threads: int = 1, pool: ThreadPoolExecutor | None = None) -> bytes:
        """The batch's PAF/SAM bytes. pool: a thread pool of n_threads workers to run the per-read ranges on
        (shared by the parts run_map maps at once), else one made for this call."""
        n = batch.n
        if n == 0:
            return b""
        if pool is None:
            with ThreadPoolExecutor(max_workers=max(1, n_threads)) as ex:
                return self.map_batch(batch, n_threads, ex)
        if self.opt.flag & MO.F_FRAG_MODE:
            frag_off = frag_offsets(*batch.name_csr())
            if frag_off.shape[0] - 1 < n:  # fragments of several reads: mapped together, on the CPU threads
                return self._map_frags(pool, batch, frag_off, n_threads)
        names, name_off, seq_off, diag, sd, fp = self._batch_stages(batch)
        comments, com_off = batch.comment_csr()  # bytes + offsets as parsed: no strings made
        raw = batch.raw if batch.raw is not None else np.frombuffer(b"ACGTN", np.uint8)[batch.seq]
        raw = _u_to_t(raw)
        qual_on = bool(batch.has_qual and (self.opt.flag & MO.F_OUT_SAM) and not (self.opt.flag & MO.F_NO_QUAL))
        qual = batch.qual if batch.has_qual else np.zeros(0, np.uint8)
        ranges = _ranges(seq_off, max(1, n_threads))
        if self.batch_align:
            return self._map_staged(pool, batch, ranges, seq_off, raw, qual, qual_on, names, name_off, comments,
                                    com_off, diag, sd, fp)
        b, bkt_off, keys, key_off, pos = self.idx.arrays()
        ref = self.idx.ref
        t = time.perf_counter()

        def run(lo_hi):
            lo, hi = lo_hi
            buf, used = map_range(lo, hi, batch.seq, seq_off, raw, qual, qual_on, names, name_off, comments, com_off,
                                  self.iv, self.fv, b, bkt_off, keys, key_off, pos, self.ref_len, ref.ref_seq,
                                  ref.ref_off, self.ctg_names, self.ctg_noff, self.rg_id, self.dual_skip, diag,
                                  self.batch_seed, *sd, self.batch_chain, *fp)
            return buf[:used].tobytes()

        out = run(ranges[0]) if len(ranges) == 1 else b"".join(pool.map(run, ranges))
        self._lap("chaining+alignment+text (CPU threads)", t)
        return out

    def _map_frags(self, pool, batch, frag_off, n_threads):
        """map_batch of a batch holding fragments of several reads (minimap2's fragment mode): map_frag_range
        over ranges of whole fragments on the CPU threads (the batch seeding, chaining and alignment of the GPU
        path take single reads only)."""
        names, name_off = batch.name_csr()
        seq_off = batch.seq_off - batch.seq_off[0]
        diag = self._diag_rids(batch)
        comments, com_off = batch.comment_csr()
        raw = _u_to_t(batch.raw if batch.raw is not None else np.frombuffer(b"ACGTN", np.uint8)[batch.seq])
        qual_on = bool(batch.has_qual and (self.opt.flag & MO.F_OUT_SAM) and not (self.opt.flag & MO.F_NO_QUAL))
        qual = batch.qual if batch.has_qual else np.zeros(0, np.uint8)
        b, bkt_off, keys, key_off, pos = self.idx.arrays()
        ref = self.idx.ref
        ranges = _ranges(np.ascontiguousarray(seq_off[frag_off]), max(1, n_threads))
        if self.stage_frags and not (self.opt.flag & MO.F_INDEPEND_SEG):
            return self._map_frags_staged(pool, batch, frag_off, ranges, seq_off, diag, comments, com_off, raw,
                                          qual_on, qual)
        t = time.perf_counter()

        def run(lo_hi):
            buf, used = map_frag_range(lo_hi[0], lo_hi[1], frag_off, batch.seq, seq_off, raw, qual, qual_on, names,
                                       name_off, comments, com_off, self.iv, self.fv, b, bkt_off, keys, key_off, pos,
                                       self.ref_len, ref.ref_seq, ref.ref_off, self.ctg_names, self.ctg_noff,
                                       self.rg_id, self.dual_skip, diag)
            return buf[:used].tobytes()

        out = run(ranges[0]) if len(ranges) == 1 else b"".join(pool.map(run, ranges))
        self._lap("fragments: chaining+alignment+text (CPU threads)", t)
        return out

    def _map_frags_staged(self, pool, batch, frag_off, ranges, seq_off, diag, comments, com_off, raw, qual_on, qual):
        """_map_frags with the base alignment as one batch of ksw2 jobs, as _map_staged does for single reads:
        every range of fragments planned on the pool (map_frag_plan), the jobs run on the GPU or the CPU twin, then
        every range finished (map_frag_finish). The jobs read their queries from frag_codes' buffer (the segments
        as mapped, those frag_flips names reverse-complemented)."""
        b, bkt_off, keys, key_off, pos = self.idx.arrays()
        ref = self.idx.ref
        iv = self.iv
        names, name_off = batch.name_csr()
        t = time.perf_counter()
        qc = frag_codes(batch.seq, seq_off, frag_off, iv[I_PE_ORI])

        def plan(lo_hi):
            return map_frag_plan(lo_hi[0], lo_hi[1], frag_off, qc, seq_off, names, name_off, iv, self.fv, b, bkt_off,
                                 keys, key_off, pos, self.ref_len, ref.ref_seq, ref.ref_off, self.dual_skip, diag)

        plans = list(pool.map(plan, ranges))
        jobs, P = self._plan_jobs(plans, [int(frag_off[lo]) for lo, _ in ranges], seq_off)
        t = self._lap("fragments: chaining+regions (CPU)", t)
        pez, pcig, pcig_off, pn_cig = self._ksw2(qc, jobs, P, self._align_setup() if self.device == "gpu"
                                                 else ref.ref_seq)
        t = self._lap("fragments: extension (ksw2 batch)", t)
        k0 = np.cumsum([0] + [pl[5].shape[0] for pl in plans])

        def finish(i):
            (lo, hi), pl = ranges[i], plans[i]
            a, c = int(k0[i]), int(k0[i + 1])
            buf, used = map_frag_finish(lo, hi, frag_off, batch.seq, qc, seq_off, raw, qual, qual_on, names, name_off,
                                        comments, com_off, iv, self.fv, self.ref_len, ref.ref_seq, ref.ref_off,
                                        self.ctg_names, self.ctg_noff, self.rg_id, *pl, pez[a:c], pcig,
                                        pcig_off[a:c], pn_cig[a:c])
            return buf[:used].tobytes()

        out = b"".join(pool.map(finish, range(len(ranges))))
        self._lap("fragments: alignment replay+output (CPU)", t)
        return out

    def _align_setup(self):
        """The reference on the GPU and the ksw2 module loaded, once (device_setup does it for every part when the
        device is not deferred): what the staged fragment path needs."""
        if self._ref_dev is None:
            import cupy as cp

            from g3align.kernels.loader import get_module
            with self._lock:
                if self._ref_dev is None:
                    get_module("ksw2")
                    self._ref_dev = cp.asarray(self.idx.ref.ref_seq)
        return self._ref_dev

    def _lap(self, stage: str, t0: float) -> float:
        return lap(self.stage_times, stage, t0)  # (lap takes the stage-times lock itself)

    def _batch_stages(self, batch):
        """What every read of the batch needs first: (names CSR, seq_off from 0, -D contigs, the batch's seeds
        (_NO_SEEDS unless batch_seed), its DP chaining scores (_NO_FP unless batch_chain))."""
        self.device_setup()
        names, name_off = batch.name_csr()
        seq_off = batch.seq_off - batch.seq_off[0]
        diag = self._diag_rids(batch)
        t = time.perf_counter()
        sd = self._seed_batch(batch.seq, seq_off, diag, self.idx.arrays()) if self.batch_seed else _NO_SEEDS
        t = self._lap("seeding", t)
        fp = self._chain_scores(np.diff(seq_off), sd[2], sd[3]) if self.batch_chain else _NO_FP
        if self.device == "gpu" and self.batch_seed:  # the seeds stayed on the GPU for the chaining scores
            from g3align.aligner.gpu.pinned import fetch
            sd = tuple(fetch(x) for x in sd)
        self._lap("chaining scores", t)
        return names, name_off, seq_off, diag, sd, fp

    def _map_staged(self, ex, batch, ranges, seq_off, raw, qual, qual_on, names, name_off, comments, com_off,
                    diag, sd, fp) -> bytes:
        """map_batch with the base alignment as one batch of ksw2 jobs (aligner/map/align_batch.py): plan every range
        (map_range_plan) on the pool ex, run the jobs on the GPU or the CPU twin, then finish every range."""
        ref = self.idx.ref
        t = time.perf_counter()
        plans, jobs, P = self._plan(ex, batch, ranges, seq_off, names, name_off, diag, sd, fp)
        t = self._lap("chaining+regions (CPU)", t)
        pez, pcig, pcig_off, pn_cig = self._ksw2(batch.seq, jobs, P,
                                                 self._ref_dev if self.device == "gpu" else ref.ref_seq)
        t = self._lap("extension (ksw2 batch)", t)
        k0 = np.cumsum([0] + [pl[5].shape[0] for pl in plans])

        def finish(i):
            (lo, hi), pl = ranges[i], plans[i]
            a, c = int(k0[i]), int(k0[i + 1])
            buf, used = map_range_finish(lo, hi, batch.seq, seq_off, raw, qual, qual_on, names, name_off,
                                         comments, com_off, self.iv, self.fv, self.ref_len, ref.ref_seq,
                                         ref.ref_off, self.ctg_names, self.ctg_noff, self.rg_id, *pl, pez[a:c],
                                         pcig, pcig_off[a:c], pn_cig[a:c])
            return buf[:used].tobytes()

        out = b"".join(ex.map(finish, range(len(ranges))))
        self._lap("alignment replay+output (CPU)", t)
        return out

    def _plan(self, ex, batch, ranges, seq_off, names, name_off, diag, sd, fp):
        """map_range_plan over the ranges on the executor -> (per-range plans, ksw2 jobs of the batch, P)."""
        b, bkt_off, keys, key_off, pos = self.idx.arrays()
        ref = self.idx.ref

        def plan(lo_hi):
            lo, hi = lo_hi
            return map_range_plan(lo, hi, batch.seq, seq_off, names, name_off, self.iv, self.fv, b, bkt_off, keys,
                                  key_off, pos, self.ref_len, ref.ref_seq, ref.ref_off, self.dual_skip, diag,
                                  self.batch_seed, *sd, self.batch_chain, *fp)

        plans = list(ex.map(plan, ranges))
        jobs, P = self._plan_jobs(plans, [lo for lo, _ in ranges], seq_off)
        return plans, jobs, P

    def _plan_jobs(self, plans, first_reads, seq_off):
        """The batch's ksw2 jobs from its ranges' plans (map_range_plan / map_frag_plan: the job keys pl[5], their
        offsets per read pl[6]; first_reads: each range's first read in the batch) -> (jobs, P)."""
        from g3align.aligner.map import align_batch as mmext
        iv = self.iv
        K = np.concatenate([pl[5] for pl in plans]) if plans else np.zeros((0, MA.KJ), np.int64)
        key_read = np.concatenate([np.repeat(np.arange(r0, r0 + pl[6].shape[0] - 1, dtype=np.int64), np.diff(pl[6]))
                                   for r0, pl in zip(first_reads, plans)])
        jobs = mmext.keys_to_jobs(K, key_read, seq_off, self.idx.ref.ref_off)
        P = mmext.scoring_pset(int(iv[I_A]), int(iv[I_B]), int(iv[I_SC_AMBI]), int(iv[I_Q]), int(iv[I_E]),
                               int(iv[I_Q2]), int(iv[I_E2]))
        return jobs, P

    def _ksw2(self, seq_buf, jobs, P, ref_seq):
        """The jobs (queries in seq_buf) on the GPU, on the worker's ksw2 stream where worker_init made one, or on
        the CPU twin -> (ez, cig, cig_off, n_cig); their counts added to ext_stats."""
        from g3align.aligner.map import align_batch as mmext
        stats: dict = {}
        ksw2_stream = getattr(_WORKER, "ksw2_stream", None)  # (worker_init's, on the GPU)
        with contextlib.nullcontext() if ksw2_stream is None else on_stream(ksw2_stream):
            out = mmext.run_jobs(seq_buf, ref_seq, jobs, P, self.device, stats, MAP_KSW2_SCRATCH)
        with self._lock:
            for k, v in stats.items():
                self.ext_stats[k] = self.ext_stats.get(k, 0) + v
        return out

    def batch_jobs(self, batch, n_threads: int = 1):
        """The ksw2 jobs the staged path would run for a batch: (code buffer, jobs, P) (for benchmarks)."""
        names, name_off, seq_off, diag, sd, fp = self._batch_stages(batch)
        with ThreadPoolExecutor(max_workers=max(1, n_threads)) as ex:
            _, jobs, P = self._plan(ex, batch, _ranges(seq_off, max(1, n_threads)), seq_off, names, name_off, diag,
                                    sd, fp)
        return batch.seq, jobs, P

    def _seed_batch(self, seq, seq_off, diag, idx_arrays):
        """The batch's minimizers and seeds in CSR form, on the GPU (device "gpu") or the CPU twins;
        idx_arrays: the index's (b, bkt_off, keys, key_off, pos)."""
        from g3align.aligner.map.gpu import seed as SG
        from g3align.aligner.map.gpu import sketch as SK
        iv, fv = self.iv, self.fv
        w, k, hpc = int(iv[I_W]), int(iv[I_K]), bool(iv[I_HPC])
        opts = (int(iv[I_MID_OCC]), int(iv[I_MAX_MAX_OCC]), int(iv[I_OCC_DIST]), float(fv[F_Q_OCC_FRAC]),
                int(iv[I_FLAG]))
        b, bkt_off, keys, key_off, pos = idx_arrays
        sdust = int(iv[I_SDUST])
        if self.device == "gpu":
            t0 = time.perf_counter()
            mz, mz_off = SK.sketch_batch_gpu(seq, seq_off, w, k, hpc, to_host=False)
            if sdust > 0:  # -T: SDUST masking on the host (mm_dust_minier)
                import cupy as cp
                mz, mz_off = dust_batch(cp.asnumpy(mz), cp.asnumpy(mz_off), seq, seq_off, sdust)
                mz, mz_off = cp.asarray(mz), cp.asarray(mz_off)
            t1 = time.perf_counter()
            sd = SG.seed_batch_gpu(mz, mz_off, seq_off, *opts, b, *self._idx_dev, self.ref_len, diag,
                                   self.dual_skip, to_host=False)  # on the device: see _batch_stages
            trace_event("sketch", t0, t1)  # with G3ALIGN_TRACE: the seeding's two halves (each ends on a host wait)
            trace_event("seed lookup+sort", t1, time.perf_counter())
        else:
            mz, mz_off = SK.sketch_batch_cpu(seq, seq_off, w, k, hpc)
            if sdust > 0:
                mz, mz_off = dust_batch(mz, mz_off, np.ascontiguousarray(seq, np.uint8),
                                        np.ascontiguousarray(seq_off, np.int64), sdust)
            sd = SG.seed_batch_cpu(mz, mz_off, seq_off, *opts, b, bkt_off, keys, key_off, pos, self.ref_len, diag,
                                   self.dual_skip)
        rep = sd.rep_len if self.device == "gpu" else np.asarray(sd.rep_len, np.int64)  # (int64 on the GPU)
        return (sd.mv, sd.mv_off, sd.a, sd.a_off, rep, sd.mini_pos, sd.mini_off)


    def _chain_scores(self, qlen, a, a_off):
        """mg_lchain_dp's scores f and predecessors p of every anchor of the batch: kernels/lchain.cu's
        warp-per-read kernel on the GPU, lchain_gpu.dp_scores_batch (its twin) on the CPU. Limits per read as
        map_one computes them."""
        from g3align.aligner.map.gpu import lchain as LG
        iv, fv = self.iv, self.fv
        is_sr = bool(iv[I_FLAG] & MO.F_SR)
        qlen = np.asarray(qlen, np.int64)
        max_gap, gap_ref, frag = int(iv[I_MAX_GAP]), int(iv[I_MAX_GAP_REF]), int(iv[I_MAX_FRAG_LEN])
        gq = np.maximum(qlen, max_gap) if is_sr else np.full(qlen.shape[0], max_gap, np.int64)
        if gap_ref > 0:
            gr = np.full(qlen.shape[0], gap_ref, np.int64)
        elif frag > 0:
            gr = np.maximum(frag - qlen, max_gap)
        else:
            gr = np.full(qlen.shape[0], max_gap, np.int64)
        bw = int(iv[I_BW])
        mdx, mdy = LG.limits_batch(gr, gq, bw, 0)
        pg, ps = LC.chain_pens(fv[F_CHAIN_GAP_SCALE], fv[F_CHAIN_SKIP_SCALE], iv[I_K])
        args = (a, a_off, mdx, mdy, np.ones(qlen.shape[0], np.int64), bw, int(iv[I_MAX_CHAIN_SKIP]),
                int(iv[I_MAX_CHAIN_ITER]), np.float32(pg), np.float32(ps), 0)
        if self.device == "gpu":
            return LG.dp_scores_gpu_warp(*args)
        return LG.dp_scores_batch(*args)


_Z1 = np.zeros(1, np.int64)
_NO_FP = (np.zeros(0, np.int64), np.zeros(0, np.int64))
_NO_SEEDS = (np.zeros((0, 2), np.uint64), _Z1, np.zeros((0, 2), np.uint64), _Z1, _Z1, np.zeros(0, np.uint64), _Z1)


@njit(cache=True, nogil=True)
def _u_to_t(raw: np.ndarray) -> np.ndarray:
    """The read letters with U/u as T/t (minimap2 prints RNA reads' U as T): `raw` itself when it has no U
    (the usual case: no copy), else a copy. Compiled without the GIL: it runs on whole parts, beside the
    other parts' threads."""
    n = raw.shape[0]
    i = 0
    while i < n and raw[i] != 85 and raw[i] != 117:
        i += 1
    if i == n:
        return raw
    out = raw.copy()
    for j in range(i, n):
        if out[j] == 85:
            out[j] = 84
        elif out[j] == 117:
            out[j] = 116
    return out


def _rg_id(rg: str | None) -> str:
    if not rg:
        return ""
    from g3align.aligner.io.sam import parse_rg
    return parse_rg(rg)[1]


_WORKER = threading.local()  # a part worker's CUDA stream


def run_map(aligner: MapAligner, batches, sink, verbose: int = 3, marks: bool = False) -> tuple[int, float]:
    """Map `batches` and write their records in input order. Items are ReadBatch (one -K batch each) or
    (part, end_of_batch) pairs (reads.read_batch_parts); up to MAP_DEPTH items are mapped at once (see
    reads.MAP_PART_BASES), one per worker thread, their per-read ranges on one pool of -t threads. Returns (reads,
    seconds). With several parts in flight the stage times are sums over the workers, not wall times. marks:
    BATCH_END written after each item's records; a None item: no input is waiting (the oldest part in flight is
    written meanwhile)."""
    n_reads = 0
    t0 = time.time()
    t_wall = time.perf_counter()
    n_threads = max(1, aligner.opt.n_threads)
    if not aligner.defer_device:
        aligner.device_setup()
    pend: deque = deque()
    batch_reads, batch_t0 = 0, time.time()  # reads of the current -K batch written, when it started

    def write_oldest():
        nonlocal batch_reads, batch_t0
        fut, n, end = pend.popleft()
        out = fut.result()
        t = time.perf_counter()
        sink.write(out)
        if marks:
            sink.write(BATCH_END)
        aligner._lap("output", t)
        bar.update(n)
        batch_reads += n
        if end:
            log(f"[M::worker_pipeline::{time.time() - t0:.3f}] mapped {batch_reads} sequences "
                f"({time.time() - batch_t0:.3f} s)", verbose)
            batch_reads, batch_t0 = 0, time.time()

    with ThreadPoolExecutor(max_workers=n_threads) as pool, \
            ThreadPoolExecutor(max_workers=max(1, MAP_DEPTH), thread_name_prefix="g3align-part",
                               initializer=aligner.worker_init) as workers, Progress("map", verbose) as bar:
        try:
            t = time.perf_counter()
            for item in batches:
                if item is None:  # (shard.py's workers) no input waiting: the oldest part in flight is written
                    if pend:
                        write_oldest()
                    continue
                part, end = item if isinstance(item, tuple) else (item, True)
                aligner._lap("reading (waiting for the reader)", t)
                pend.append((workers.submit(aligner.map_batch, part, n_threads, pool), part.n, end))
                n_reads += part.n
                while len(pend) >= max(1, MAP_DEPTH) + max(0, MAP_QUEUED) or (pend and pend[0][0].done()):
                    write_oldest()
                t = time.perf_counter()
            while pend:
                write_oldest()
        finally:
            for fut, _, _ in pend:
                fut.cancel()
    aligner._lap("mapping, all parts (wall)", t_wall)
    return n_reads, time.time() - t0


def warm_thread(aligner) -> threading.Thread | None:
    """Started by map's CLI once `aligner` (a MapAligner on the GPU) has its device set-up done: a
    thread that runs the seeding and the chaining scores once on two reads cut from the reference (a piece and its
    reverse complement), on a stream of its own, and drops the results. CuPy loads each of the scans, sorts and
    element-wise kernels these stages use from its disk cache at first use (1-25 ms each); this way the first
    parts' workers find them loaded instead of waiting for them (without it, traces showed ~30 ms of "cupy compile"
    inside the first wave's seeding). It first makes the part workers' staging buffers (pinned.stage_warm). Nothing
    the output depends on is touched."""
    if aligner.device != "gpu" or not aligner.batch_seed:
        return None

    def run():
        try:
            import cupy as cp

            from g3align.aligner.gpu.pinned import stage_warm
            stage_warm(MAP_DEPTH)  # the part workers' staging buffers for their transfers (pinned.fetch / put)
            ref = aligner.idx.ref
            c = int(np.argmax(np.diff(ref.ref_off)))  # the middle of the longest contig (chr20 starts with 60 kb
            ln = int(ref.ref_off[c + 1] - ref.ref_off[c])  # of N, which have no minimizers: nothing would run)
            n = min(2000, ln)
            if n < 200:
                return
            fw = ref.ref_seq[int(ref.ref_off[c]) + (ln - n) // 2:][:n]
            rc = np.where(fw < 4, 3 - fw, 4).astype(np.uint8)[::-1]
            seq = np.ascontiguousarray(np.concatenate([fw, rc]))
            seq_off = np.array([0, n, 2 * n], np.int64)
            with cp.cuda.Stream(non_blocking=True) as st:
                sd = aligner._seed_batch(seq, seq_off, np.full(2, -1, np.int64), aligner.idx.arrays())
                if aligner.batch_chain:
                    aligner._chain_scores(np.diff(seq_off), sd[2], sd[3])
                st.synchronize()
        except Exception:  # a warm-up only: a failure shows again where it matters
            pass

    th = threading.Thread(target=run, name="g3align-gpu-warm", daemon=True)
    th.start()
    return th
