"""aligner/map/align.py (minimap2 2.24's align.c) against minimap2 itself.

The vectors ``tests/data/mmalign_<name>.npz`` were made with a patched copy of minimap2 v2.24 (built
outside the repository) whose map.c ``align_regs`` writes, for every read, the input of
``mm_align_skeleton`` -- the read's base codes, the regions as they come out of chain_post / est_err /
filter_strand_retained, the anchors -- and its output: every region field, the ``mm_extra_t`` fields
and the CIGAR.  The harness's PAF output was byte-identical to /usr/bin/minimap2 2.24-r1122 on the same
runs.  Each file also holds the reference windows the reads touch (the rest of the contigs is N, so a
read of the reference outside what minimap2 needs shows up as a difference).

Sets: map-ont (E. coli R9 reads incl. a 126 kb one, reads with Z-drop splits and inversions), map-pb
(RS II reads vs the PBcR reference, HPC index), map-hifi (RS II reads under the HiFi scoring: many
splits), sr (wgsim 150 bp), map-ont-eqx (--eqx), syn-ont / syn-pb (simulated reads with inversions,
large indels, tandem duplications and N runs, where the inversion rescue fires); on the simulated reads
with map-ont and: qstrand (--qstrand), opts (--end-bonus 10 -z 150,80 --cap-sw-mem 2000000
--max-clip-ratio 0.3 --min-dp-len 50 -s 300), extz2 (-O 4 -E 2: one gap model, so ksw_extz2).

Header ``hdr`` (int64[32]): magic, flag, k, index flag, a, b, q, e, q2, e2, sc_ambi, zdrop, zdrop_inv,
end_bonus, bw, bw_long, max_gap, min_cnt, min_chain_score, min_dp_max, min_ksw_len, max_clip_ratio
(float32 bits), rank_min_len, rank_frac (bits), alt_drop (bits), max_sw_mat, split_prefix set,
anchor_ext_len, anchor_ext_shift, noncan, junc_bonus.  Region rows: the first 36 columns of mm_types'
region matrix (ID .. N_CIGAR).
"""
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.map import align as mmalign
from g3align.aligner.map.types import CIG_OFF, HAS_P, N_CIGAR, new_regs

DATA = Path(__file__).parent / "data"
SETS = ["map-ont", "map-pb", "map-hifi", "sr", "map-ont-eqx", "syn-ont", "syn-pb", "qstrand", "opts", "extz2"]


def _f32(bits):
    return float(np.array([bits], np.int32).view(np.float32)[0])


def _load(name):
    d = np.load(DATA / f"mmalign_{name}.npz")
    ref_off = d["ref_off"]
    ref = np.full(int(ref_off[-1]), 4, np.uint8)
    p = 0
    for s, e in zip(d["wst"], d["wen"]):
        ref[s:e] = d["wseq"][p:p + e - s]
        p += e - s
    return d, ref, ref_off


def _run(h, ref, ref_off, qseq, rin, a, jc=None):
    o = [int(x) for x in h]
    n = rin.shape[0]
    R = new_regs(max(n, 1))
    R[:n, :36] = rin
    cig = np.zeros(16, np.uint32)
    return mmalign.align_skeleton(
        o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], o[9], o[10], o[11], o[12], o[13], o[14], o[15], o[16],
        o[17], o[18], o[19], o[20], _f32(o[21]), o[22], _f32(o[23]), _f32(o[24]), o[25], o[26],
        ref, ref_off, qseq, R, n, a.copy(), cig, 0, mmalign.jc_new(mmalign.JC_DIRECT, 0) if jc is None else jc)


def _run_staged(h, ref, ref_off, qseq, rin, a, counts):
    """The staged path on one read: plan (keys of the ksw calls), the jobs through the batch twin
    (aligner/map/gpu/ksw2.py), then the replay served from their results."""
    from g3align.aligner.map import align_batch as mmext
    jc = mmalign.jc_new(mmalign.JC_PLAN, int(rin[:, 3].sum()) + 2 * rin.shape[0] + 4 if rin.shape[0] else 4)
    _run(h, ref, ref_off, qseq, rin, a, jc)
    nk = int(jc[0][2])
    K = jc[1][:nk]
    o = [int(x) for x in h]
    jobs = mmext.keys_to_jobs(K, np.zeros(nk, np.int64), np.array([0, len(qseq)], np.int64), ref_off)
    ez, cg, cg_off, n_cig = mmext.run_jobs(qseq, ref, jobs, mmext.scoring_pset(o[4], o[5], o[10], o[6], o[7], o[8],
                                                                               o[9]), "cpu")
    ctl = np.zeros(4, np.int64)
    ctl[0], ctl[2] = mmalign.JC_REPLAY, nk
    out = _run(h, ref, ref_off, qseq, rin, a, (ctl, np.ascontiguousarray(K), ez, cg, cg_off[:nk], n_cig))
    counts[0] += nk
    counts[1] += int(ctl[3])
    return out


@pytest.mark.parametrize("staged", [False, True], ids=["per-read", "staged"])
@pytest.mark.parametrize("name", SETS)
def test_align_skeleton_matches_minimap2(name, staged):
    d, ref, ref_off = _load(name)
    h = d["hdr"]
    q, qo = d["q"], d["q_off"]
    rin, rio = d["rin"], d["rin_off"]
    a, ao = d["a"], d["a_off"]
    rout, roo = d["rout"], d["rout_off"]
    cig, co = d["cig"], d["cig_off"]
    n_reads = len(qo) - 1
    counts = [0, 0]  # staged: jobs planned, calls served from them
    bad = []
    n_reg = 0
    for r in range(n_reads):
        args = (h, ref, ref_off, q[qo[r]:qo[r + 1]], rin[rio[r]:rio[r + 1]], a[ao[r]:ao[r + 1]])
        R, n, cb, _ = _run_staged(*args, counts) if staged else _run(*args)
        exp = rout[roo[r]:roo[r + 1]]
        if n != exp.shape[0]:
            bad.append(f"read {r}: {n} regions, minimap2 {exp.shape[0]}")
            continue
        for j in range(n):
            ci = roo[r] + j
            ec = cig[co[ci]:co[ci + 1]]
            gc = cb[R[j, CIG_OFF]:R[j, CIG_OFF] + R[j, N_CIGAR]] if R[j, HAS_P] else ec[:0]
            diff = np.nonzero(R[j, :36] != exp[j])[0]
            if diff.size or not np.array_equal(gc, ec):
                bad.append(f"read {r} region {j}: columns {diff.tolist()} {R[j, diff].tolist()} vs "
                           f"{exp[j, diff].tolist()}, cigar equal {np.array_equal(gc, ec)}")
        n_reg += n
    assert n_reg > 0
    assert not bad, f"{len(bad)} differences, first: " + "; ".join(bad[:5])
    if staged and name not in ("qstrand", "extz2", "sr"):  # these plan no jobs (or only the two ends)
        assert counts[0] > 0 and counts[1] >= 0.9 * counts[0], counts


def test_mg_log2_matches_c():
    # float32 bit patterns of minimap2's mg_log2(1.0 + l), printed by the C function
    want = {1: 0x3F80A1DE, 2: 0x3FCB0900, 7: 0x404050EF, 100: 0x40D52AB0, 12345: 0x41597DC5}
    for l, bits in want.items():
        got = np.array([mmalign.mg_log2(1.0 + l)], np.float32).view(np.uint32)[0]
        assert got == bits, (l, hex(got))


def _region_with_cigar(ops, qs=0, qe=0, rs=0, re=0, rev=0):
    R = new_regs(2)
    cb = np.zeros(4, np.uint32)
    cig = np.array([ln << 4 | op for ln, op in ops], np.uint32)
    cb, used = mmalign.append_cigar(R, 0, cb, 0, cig, cig.shape[0])
    R[0, 4], R[0, 5], R[0, 6], R[0, 7], R[0, 17] = qs, qe, rs, re, rev
    return R, cb, used


def _cigar(R, cb, i=0):
    return [(int(c >> 4), int(c & 15)) for c in cb[R[i, CIG_OFF]:R[i, CIG_OFF] + R[i, N_CIGAR]]]


def test_append_cigar_merges_same_op():
    R, cb, used = _region_with_cigar([(5, 0), (2, 1)])
    cb, used = mmalign.append_cigar(R, 0, cb, used, np.array([3 << 4 | 1, 4 << 4 | 0], np.uint32), 2)
    assert _cigar(R, cb) == [(5, 0), (5, 1), (4, 0)]


def test_fix_cigar_left_aligns_and_merges_indels():
    # query ACGTTTACG vs target ACGTTACG: the 1I after ACGTT moves left to the start of the T run
    q = np.array([0, 1, 2, 3, 3, 3, 0, 1, 2], np.uint8)
    t = np.array([0, 1, 2, 3, 3, 0, 1, 2], np.uint8)
    R, cb, _ = _region_with_cigar([(5, 0), (1, 1), (3, 0)], 0, 9, 0, 8)
    assert mmalign.fix_cigar(R, 0, cb, q, t) == (0, 0)
    assert _cigar(R, cb) == [(3, 0), (1, 1), (5, 0)]
    # 2I 3D 1I -> 3I 3D; a leading insertion is clipped off (qs moves on the forward strand)
    q = np.zeros(20, np.uint8)
    t = np.zeros(20, np.uint8)
    R, cb, _ = _region_with_cigar([(2, 1), (4, 0), (2, 1), (3, 2), (1, 1), (4, 0)], 10, 23, 100, 111)
    assert mmalign.fix_cigar(R, 0, cb, q + 1, t + 2) == (2, 0)
    assert _cigar(R, cb) == [(4, 0), (3, 1), (3, 2), (4, 0)]
    assert R[0, 4] == 12
