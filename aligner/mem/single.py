"""Single-end bwa mem per read, as a batch kernel over a range of reads (CPU twin).

`align_range_se` is the CPU kernel: it walks reads [i0, i1) of a ReadBatch (struct-of-arrays) and
returns their SAM records as one byte buffer. It is `nogil`, so the pipeline runs contiguous ranges on
several threads and concatenates the buffers in order: output never depends on -t or batch size.

Per read it follows bwa's mem_align1_core + mem_reg2sam:
  collect_intv (smem.py) -> chain_and_filter (chain.py) -> flt_chained_seeds -> chain2aln (extend.py)
  -> sort_dedup_patch -> mark_primary_se (select.py) -> gen_alt / reg2aln / write_record (samout.py)
"""
import numpy as np

from g3align.aligner.mem.chain import chain_and_filter, rep_len
from g3align.aligner.mem.extend import (
    IS_ALT,
    NF,
    QB,
    RID,
    SCORE,
    SECONDARY,
    SECONDARY_ALL,
    XF,
    chain2aln,
    flt_chained_seeds,
)
from g3align.aligner.mem.options import F_ALL, F_KEEP_SUPP_MAPQ, F_NO_MULTI, F_PRIMARY5, contig_is_alt
from g3align.aligner.mem.primary import INT_MAX, mark_primary_se, sort_dedup_patch
from g3align.aligner.mem.samout import (
    cg_empty,
    cg_slice,
    gen_alt,
    reg2aln,
    write_record,
)
from g3align.aligner.mem.smem import collect_intv
from g3align.aligner.runtime.nbshare import owned_text, unowned
from g3align.jit import njit

_NO_X = np.zeros((0, XF), np.int64)


@njit(cache=True, inline="always")
def mark_alt_regions(opt, R, n):
    """The end of mem_align1_core: a region on an ALT contig is an ALT hit."""
    if opt.alt.shape[0] > 0:
        for k in range(n):
            R[k, IS_ALT] = contig_is_alt(opt, R[k, RID])


@njit(cache=True)
def align1_core(fm, offsets, l_pac, pac, q, opt, mat):
    """Alignment regions of one read: (R, n_regions, l_rep)."""
    L = q.shape[0]
    if L < opt.min_seed_len:
        return np.zeros((8, NF), np.int64), 0, 0
    mb, me, mk, ms = collect_intv(fm, q, L, opt.min_seed_len, opt.split_factor, opt.split_width,
                                  opt.max_mem_intv)
    return align1_from_intv(fm, offsets, l_pac, pac, q, opt, mat, mb, me, mk, ms)


@njit(cache=True)
def align1_from_intv(fm, offsets, l_pac, pac, q, opt, mat, mb, me, mk, ms):
    """align1_core after seeding: the read's SA intervals (from the CPU or the GPU seeding kernel) ->
    (R, n_regions, l_rep)."""
    L = q.shape[0]
    R = np.zeros((8, NF), np.int64)
    if L < opt.min_seed_len:
        return R, 0, 0
    fr = rep_len(mb, me, ms, opt.max_occ)
    s_rbeg, s_qbeg, s_len, s_score, ch_off, ch_seed, ch_rid = chain_and_filter(fm, offsets, l_pac, mb, me, mk,
                                                                                ms, opt)
    ch_off, ch_seed = flt_chained_seeds(opt, mat, offsets, l_pac, pac, L, q, s_rbeg, s_qbeg, s_len, s_score,
                                        ch_off, ch_seed)
    nreg = 0
    for c in range(ch_off.shape[0] - 1):
        R, nreg = chain2aln(opt, mat, offsets, l_pac, pac, L, q, s_rbeg, s_qbeg, s_len, s_score,
                            ch_seed[ch_off[c]:ch_off[c + 1]], ch_rid[c], fr, R, nreg, _NO_X)
    nreg = sort_dedup_patch(opt, mat, l_pac, pac, q, R, nreg, True)
    mark_alt_regions(opt, R, nreg)
    return R, nreg, fr


@njit(cache=True)
def align1_from_chains(offsets, l_pac, pac, q, opt, mat, i, pre):
    """align1_core from the staged batch state (aligner/mem/gpu/stage.py): read i's chains and their
    precomputed seed extensions -> (R, n_regions, l_rep)."""
    s_off, s_rbeg, s_qbeg, s_len, s_score, c_off, ch_rid, cs_off, ch_seed, X, fr = pre
    L = q.shape[0]
    R = np.zeros((8, NF), np.int64)
    if L < opt.min_seed_len:
        return R, 0, 0
    a, b = s_off[i], s_off[i + 1]
    nreg = 0
    for c in range(c_off[i], c_off[i + 1]):
        u, v = cs_off[c], cs_off[c + 1]
        R, nreg = chain2aln(opt, mat, offsets, l_pac, pac, L, q, s_rbeg[a:b], s_qbeg[a:b], s_len[a:b],
                            s_score[a:b], ch_seed[u:v], ch_rid[c], fr[i], R, nreg, X[u:v])
    nreg = sort_dedup_patch(opt, mat, l_pac, pac, q, R, nreg, True)
    mark_alt_regions(opt, R, nreg)
    return R, nreg, fr[i]


@njit(cache=True)
def align1_in_batch(fm, offsets, l_pac, pac, seq, seq_off, i, opt, mat, pre):
    """Regions of read i of a batch: from the staged batch state `pre` (memstage.py) when it is not
    empty, else seeded, chained and extended here."""
    q = seq[seq_off[i]:seq_off[i + 1]]
    if pre[5].shape[0] > 0:
        return align1_from_chains(offsets, l_pac, pac, q, opt, mat, i, pre)
    return align1_core(fm, offsets, l_pac, pac, q, opt, mat)


@njit(cache=True)
def reorder_primary5(opt, R, n):
    """mem_reorder_primary5 (-5): the leftmost-on-query primary becomes the first record."""
    n_pri = 0
    for k in range(n):
        if R[k, SECONDARY] < 0 and R[k, IS_ALT] == 0 and R[k, SCORE] >= opt.T:
            n_pri += 1
    if n_pri <= 1:
        return
    left_st = INT_MAX
    left_k = -1
    for k in range(n):
        if R[k, SECONDARY] >= 0 or R[k, IS_ALT] != 0 or R[k, SCORE] < opt.T:
            continue
        if R[k, QB] < left_st:
            left_st = R[k, QB]
            left_k = k
    if left_k == 0:
        return
    tmp = R[0].copy()
    R[0] = R[left_k]
    R[left_k] = tmp
    for k in range(1, n):
        for f in (SECONDARY, SECONDARY_ALL):
            if R[k, f] == 0:
                R[k, f] = left_k
            elif R[k, f] == left_k:
                R[k, f] = 0




@njit(cache=True, specialize_literals=False)
def reg2sam_se(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q, name, qual, has_qual,
               comment, rg_id, R, nreg, read_id, cg):
    """mem_mark_primary_se + mem_reg2sam for one single-end read; appends records to buf."""
    mark_primary_se(opt, R, nreg, read_id)
    if opt.flag & F_PRIMARY5:
        reorder_primary5(opt, R, nreg)
    return reg2sam(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q, name, qual, has_qual,
                   comment, rg_id, R, nreg, 0, False, -1, -1, 0, np.empty(0, np.uint32), cg)


@njit(cache=True, specialize_literals=False)
def reg2sam(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q, name, qual, has_qual,
            comment, rg_id, R, nreg, extra_flag, m_has, m_rid, m_pos, m_rev, m_cig, cg):
    """bwa's mem_reg2sam on regions already marked primary/secondary: the read's records (primary,
    supplementary, with -a secondary; or one unmapped record), with `extra_flag` and the mate's
    position (m_*) for paired reads. cg: the read's precomputed alignments (samout.reg2aln)."""
    # inputs held by the caller for the call, none returned: unowned views (no reference counting per hand-over)
    mat, offsets, pac, ctg_names, ctg_off, q, name, qual, comment, rg_id, R, m_cig, cg = unowned(
        (mat, offsets, pac, ctg_names, ctg_off, q, name, qual, comment, rg_id, R, m_cig, cg))
    L = q.shape[0]
    has_xa = False
    xa_off = np.zeros(nreg + 1, np.int64)
    xa = np.empty(0, np.uint8)
    if not (opt.flag & F_ALL):
        xa_off, xa, has_xa = gen_alt(opt, mat, offsets, l_pac, pac, L, q, R, nreg, ctg_names, ctg_off, cg)
    cap = nreg if nreg > 0 else 1
    l_rid = np.empty(cap, np.int64)
    l_pos = np.empty(cap, np.int64)
    l_rev = np.empty(cap, np.int64)
    l_mapq = np.empty(cap, np.int64)
    l_flag = np.empty(cap, np.int64)
    l_nm = np.empty(cap, np.int64)
    l_score = np.empty(cap, np.int64)
    l_sub = np.empty(cap, np.int64)
    l_alt = np.empty(cap, np.int64)
    l_k = np.empty(cap, np.int64)
    cig_off = np.zeros(cap + 1, np.int64)
    md_off = np.zeros(cap + 1, np.int64)
    cigs = np.empty(64, np.uint32)
    mds = np.empty(256, np.uint8)
    m = 0
    for k in range(nreg):
        if R[k, SCORE] < opt.T:
            continue
        sec = R[k, SECONDARY]
        if sec >= 0 and (R[k, IS_ALT] != 0 or not (opt.flag & F_ALL)):
            continue
        if sec >= 0 and sec < INT_MAX and np.float32(R[k, SCORE]) < np.float32(R[sec, SCORE]) * opt.drop_ratio:
            continue
        rid, pos, is_rev, mapq, flag, nm, cig, md, score, sub, alt_sc = reg2aln(
            opt, mat, offsets, l_pac, pac, L, q, R, k, cg)
        flag |= extra_flag
        if sec >= 0:
            sub = -1
        if m > 0 and sec < 0:
            flag |= 0x10000 if (opt.flag & F_NO_MULTI) else 0x800
        if not (opt.flag & F_KEEP_SUPP_MAPQ) and m > 0 and R[k, IS_ALT] == 0 and mapq > l_mapq[0]:
            mapq = l_mapq[0]
        l_rid[m] = rid
        l_pos[m] = pos
        l_rev[m] = is_rev
        l_mapq[m] = mapq
        l_flag[m] = flag
        l_nm[m] = nm
        l_score[m] = score
        l_sub[m] = sub
        l_alt[m] = alt_sc
        l_k[m] = k
        nc = cig.shape[0]
        if cig_off[m] + nc > cigs.shape[0]:
            c2 = np.empty(2 * (cig_off[m] + nc), np.uint32)
            c2[:cig_off[m]] = cigs[:cig_off[m]]
            cigs = c2
        cigs[cig_off[m]:cig_off[m] + nc] = cig
        cig_off[m + 1] = cig_off[m] + nc
        nmd = md.shape[0]
        if md_off[m] + nmd > mds.shape[0]:
            d2 = np.empty(2 * (md_off[m] + nmd), np.uint8)
            d2[:md_off[m]] = mds[:md_off[m]]
            mds = d2
        mds[md_off[m]:md_off[m] + nmd] = md
        md_off[m + 1] = md_off[m] + nmd
        m += 1
    if m == 0:
        buf, nbuf = write_record(buf, nbuf, opt, name, q, qual, has_qual, comment, rg_id, ctg_names, ctg_off,
                                 -1, -1, 0, 0, extra_flag, 0, np.empty(0, np.uint32), np.empty(0, np.uint8), 0, 0, 0,
                                 np.empty(0, np.uint8), 0,
                                 l_rid, l_pos, l_rev, cig_off, cigs, l_mapq, l_nm, l_flag, 0,
                                 m_has, m_rid, m_pos, m_rev, m_cig)
        return buf, nbuf
    for j in range(m):
        k = l_k[j]
        xa_j = xa[xa_off[k]:xa_off[k + 1]] if has_xa else np.empty(0, np.uint8)
        buf, nbuf = write_record(buf, nbuf, opt, name, q, qual, has_qual, comment, rg_id, ctg_names, ctg_off,
                                 l_rid[j], l_pos[j], l_rev[j], l_mapq[j], l_flag[j], l_nm[j],
                                 cigs[cig_off[j]:cig_off[j + 1]], mds[md_off[j]:md_off[j + 1]],
                                 l_score[j], l_sub[j], l_alt[j], xa_j, j,
                                 l_rid, l_pos, l_rev, cig_off, cigs, l_mapq, l_nm, l_flag, m,
                                 m_has, m_rid, m_pos, m_rev, m_cig)
    return buf, nbuf


@njit(cache=True, nogil=True)
def align_range_se(fm, offsets, l_pac, pac, ctg_names, ctg_off, seq, seq_off, qual, has_qual,
                   names, name_off, comments, com_off, rg_id, first_id, i0, i1, opt, mat, pre):
    """CPU kernel: SAM bytes for reads [i0, i1) of a batch (read ids first_id + i). With a non-empty `pre`
    the chains and seed extensions come precomputed (memstage.py); otherwise the kernel seeds itself."""
    (fm, offsets, pac, ctg_names, ctg_off, seq, seq_off, qual, names, name_off, comments, com_off, rg_id, mat,
     pre) = unowned((fm, offsets, pac, ctg_names, ctg_off, seq, seq_off, qual, names, name_off, comments, com_off,
                     rg_id, mat, pre))
    # the SAM text goes to an unowned view of buf_own: the record writers rebind it at every field (two atomic
    # reference-count updates each for an owned array); a buffer regrown on the way is owned (owned_text)
    buf_own = np.empty(1024 + 600 * (i1 - i0), np.uint8)
    buf = unowned(buf_own)
    nbuf = 0
    cg = cg_empty()
    for i in range(i0, i1):
        q = seq[seq_off[i]:seq_off[i + 1]]
        R, nreg, fr = align1_in_batch(fm, offsets, l_pac, pac, seq, seq_off, i, opt, mat, pre)
        qu = qual[seq_off[i]:seq_off[i + 1]] if has_qual else np.empty(0, np.uint8)
        buf, nbuf = reg2sam_se(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q,
                               names[name_off[i]:name_off[i + 1]], qu, has_qual,
                               comments[com_off[i]:com_off[i + 1]], rg_id, R, nreg, first_id + i, cg)
    return owned_text(buf_own, buf, nbuf)


@njit(cache=True, nogil=True)
def sam_se_range(offsets, l_pac, pac, ctg_names, ctg_off, seq, seq_off, qual, has_qual, names, name_off, comments,
                 com_off, rg_id, first_id, R_cat, reg_off, cg, i0, i1, opt, mat):
    """CPU kernel: SAM bytes for reads [i0, i1) of a single-end batch from their regions (R_cat rows
    [reg_off[i], reg_off[i+1]), pair.regions_range) and the regions' precomputed alignments `cg`
    (memcigar.py, or cg_empty()): align_range_se split after the regions."""
    (offsets, pac, ctg_names, ctg_off, seq, seq_off, qual, names, name_off, comments, com_off, rg_id, R_cat,
     reg_off, cg, mat) = unowned((offsets, pac, ctg_names, ctg_off, seq, seq_off, qual, names, name_off, comments,
                                  com_off, rg_id, R_cat, reg_off, cg, mat))
    # the SAM text goes to an unowned view of buf_own: the record writers rebind it at every field (two atomic
    # reference-count updates each for an owned array); a buffer regrown on the way is owned (owned_text)
    buf_own = np.empty(1024 + 600 * (i1 - i0), np.uint8)
    buf = unowned(buf_own)
    nbuf = 0
    has_cg = cg[0].shape[0] > 0
    none = cg_empty()
    for i in range(i0, i1):
        u = reg_off[i]
        nreg = reg_off[i + 1] - u
        R = np.empty((max(nreg, 1), R_cat.shape[1]), np.int64)
        R[:nreg] = R_cat[u:u + nreg]
        q = seq[seq_off[i]:seq_off[i + 1]]
        qu = qual[seq_off[i]:seq_off[i + 1]] if has_qual else np.empty(0, np.uint8)
        c = cg_slice(cg, u, u + nreg) if has_cg else none
        buf, nbuf = reg2sam_se(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q,
                               names[name_off[i]:name_off[i + 1]], qu, has_qual,
                               comments[com_off[i]:com_off[i + 1]], rg_id, R, nreg, first_id + i, c)
    return owned_text(buf_own, buf, nbuf)
