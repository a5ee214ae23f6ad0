// Traceback stage of `g3align mem` on the GPU: the CIGAR, NM and MD of every alignment region
// of a part, bwa's mem_reg2aln alignment (bwa_gen_cigar2 = banded global alignment with traceback, the
// band doubled while the score stays short of the region's true score), one thread per region.
// Numba twin: aligner/mem/gpu/cigar.py cigar_jobs_range (samout.region_cigar); results must be equal.
//
// Job j: J[8j..8j+7] = qb, qe, rb, re, truesc, w of a region (query [qb, qe) of the read, reference
// [rb, re) in forward-reverse coordinates), the read, zoff: byte offset of the job's DP scratch in ws
// (H and E rows of (qe-qb+1) int32 each, then the banded direction matrix, ncol * (re-rb) bytes), -1 when
// the job never needs the DP, -2 to skip the job (left to the SAM stage).
// Out: res[4j..4j+3] = score, NM, CIGAR ops (-1: not computed), MD length; the CIGAR in
// cig[j*CAP_CIG ...] and the MD in md[j*CAP_MD ...]. A CIGAR or MD longer than its slot gives
// (0, 0, -1, 0), as the twin.
typedef unsigned char u8;  // NVRTC has no <stdint.h>
typedef signed char i8;
typedef unsigned int u32;
typedef long long i64;

#ifndef CAP_CIG
#define CAP_CIG 32
#endif
#ifndef CAP_MD
#define CAP_MD 128
#endif
#define J_COLS 8

// P (int32): a, o_del, e_del, o_ins, e_ins, w
#define NEG_INF (-0x40000000)

struct CgOut {
    int score, nm, ncig, nmd;  // ncig -1: the CIGAR or MD did not fit its slot
};

__device__ __forceinline__ i64 infer_bw(i64 l1, i64 l2, i64 score, i64 a, i64 q, i64 r) {
    if (l1 == l2 && l1 * a - score < ((q + r - a) << 1)) return 0;
    i64 mn = l1 < l2 ? l1 : l2;
    i64 w = (i64)((double)(mn * a - score - q) / (double)r + 2.);
    i64 d = l1 > l2 ? l1 - l2 : l2 - l1;
    return w < d ? d : w;
}

// decimal digits of v >= 0 at md[n...]; false (nothing written) when they do not fit the slot
__device__ __forceinline__ bool put_uint(u8* md, int& n, i64 v) {
    int nd = 1;
    for (i64 x = v / 10; x > 0; x /= 10) ++nd;
    if (n + nd > CAP_MD) return false;
    for (int k = nd - 1; k >= 0; --k) {
        md[n + k] = (u8)(48 + v % 10);
        v /= 10;
    }
    n += nd;
    return true;
}

__device__ __forceinline__ bool put_md(u8* md, int& n, int c) {
    if (n + 1 > CAP_MD) return false;
    md[n++] = (u8)c;
    return true;
}

// append (or merge into the last) one op of a CIGAR built backwards; false when the slot is full
__device__ __forceinline__ bool push_op(u32* cig, int& n, int op, int ln) {
    if (n > 0 && (int)(cig[n - 1] & 0xf) == op) {
        cig[n - 1] += (u32)ln << 4;
        return true;
    }
    if (n >= CAP_CIG) return false;
    cig[n++] = ((u32)ln << 4) | (u32)op;
    return true;
}

__constant__ u8 BASES[5] = {65, 67, 71, 84, 78};  // "ACGTN"

// bwa_gen_cigar2 (aligner/mem/ksw.py gen_cigar2): query q[0, lq) against reference [rb, re)
__device__ CgOut gen_cigar(const int* mat, int o_del, int e_del, int o_ins, int e_ins, i64 w_,
                           const u8* __restrict__ pac, i64 l_pac, int lq, const u8* __restrict__ q, i64 rb,
                           i64 re, u8* ws, u32* cig, u8* md) {
    CgOut o;
    o.score = 0;
    o.nm = 0;
    o.ncig = 0;
    o.nmd = 0;
    const bool rev = rb >= l_pac;
    if (w_ == 0 && lq > 0 && lq == re - rb && (re <= l_pac || rb >= l_pac) && rb >= 0 && re <= 2 * l_pac) {
        // ungapped: straight from pac
        const i64 start = rev ? 2 * l_pac - re : rb;
        int score = 0, nm = 0, nmd = 0;
        i64 u = 0;
        bool fits = true;
        for (int x = 0; x < lq; ++x) {
            const int p = pac[start + x];
            const int r = rev ? 3 - p : p;
            const int qv = rev ? q[lq - 1 - x] : q[x];
            score += mat[r * 5 + qv];
            if (qv != r) {
                fits = fits && put_uint(md, nmd, u) && put_md(md, nmd, BASES[p]);
                ++nm;
                u = 0;
            } else {
                ++u;
            }
        }
        fits = fits && put_uint(md, nmd, u);
        cig[0] = (u32)lq << 4;
        o.score = score;
        o.nm = nm;
        o.ncig = fits ? 1 : -1;
        o.nmd = fits ? nmd : 0;
        return o;
    }
    // _gc_prepare: the region must lie on one strand inside [0, 2 l_pac)
    if (lq <= 0 || rb >= re || (rb < l_pac && re > l_pac)) {
        o.nm = -1;
        return o;
    }
    {
        const i64 beg = rb > 0 ? rb : 0;
        const i64 end = re < 2 * l_pac ? re : 2 * l_pac;
        if (!(beg >= l_pac || end <= l_pac) || end - beg != re - rb) {
            o.nm = -1;
            return o;
        }
    }
    const int rlen = (int)(re - rb);
    // rseq[x] / qs[x]: on the reverse strand the complemented forward reference and the reversed query
#define RSEQ(x) (rev ? 3 - (int)pac[2 * l_pac - re + (x)] : (int)pac[rb + (x)])
#define QS(x) (rev ? (int)q[lq - 1 - (x)] : (int)q[x])
    int n = 0;  // CIGAR ops
    bool fits = true;
    int score = 0;
    if (lq == rlen && w_ == 0) {
        for (int x = 0; x < lq; ++x) score += mat[RSEQ(x) * 5 + QS(x)];
        cig[0] = (u32)lq << 4;
        n = 1;
    } else {
        const i64 max_ins = (i64)((double)((((i64)lq + 1) >> 1) * mat[0] - o_ins) / (double)e_ins + 1.0);
        const i64 max_del = (i64)((double)((((i64)lq + 1) >> 1) * mat[0] - o_del) / (double)e_del + 1.0);
        i64 max_gap = max_ins > max_del ? max_ins : max_del;
        if (max_gap < 1) max_gap = 1;
        const i64 dl = rlen > lq ? rlen - lq : lq - rlen;
        i64 wl = (max_gap + dl + 1) >> 1;
        if (wl > w_) wl = w_;
        if (wl < dl + 3) wl = dl + 3;
        const int w = (int)wl;
        if (ws == 0) {  // no scratch planned (memcigar.cigar_plan): leave the job to the SAM stage
            o.ncig = -1;
            return o;
        }
        // ksw_global2 (aligner/mem/ksw.py ksw_global2_ws)
        int* hrow = (int*)ws;
        int* erow = hrow + lq + 1;
        u8* z = (u8*)(erow + lq + 1);
        const int ncol = lq < 2 * w + 1 ? lq : 2 * w + 1;
        const int oe_del = o_del + e_del, oe_ins = o_ins + e_ins;
        hrow[0] = 0;
        erow[0] = NEG_INF;
        int j = 1;
        for (; j <= lq && j <= w; ++j) {
            hrow[j] = -(o_ins + e_ins * j);
            erow[j] = NEG_INF;
        }
        for (; j <= lq; ++j) {
            hrow[j] = NEG_INF;
            erow[j] = NEG_INF;
        }
        for (int i = 0; i < rlen; ++i) {
            int f = NEG_INF;
            const int* mrow = mat + RSEQ(i) * 5;
            const int beg = i > w ? i - w : 0;
            const int end = i + w + 1 < lq ? i + w + 1 : lq;
            int h1 = beg == 0 ? -(o_del + e_del * (i + 1)) : NEG_INF;
            u8* zr = z + (i64)i * ncol - beg;
            for (int jj = beg; jj < end; ++jj) {
                const int mm = hrow[jj] + mrow[QS(jj)];
                int e = erow[jj];
                hrow[jj] = h1;
                int d, h;
                if (mm >= e) {
                    d = 0;
                    h = mm;
                } else {
                    d = 1;
                    h = e;
                }
                if (h < f) {
                    d = 2;
                    h = f;
                }
                h1 = h;
                int t = mm - oe_del;
                e -= e_del;
                if (e > t) d |= 4;
                else e = t;
                erow[jj] = e;
                t = mm - oe_ins;
                f -= e_ins;
                if (f > t) d |= 32;
                else f = t;
                zr[jj] = (u8)d;
            }
            hrow[end] = h1;
            erow[end] = NEG_INF;
        }
        score = hrow[lq];
        // traceback, ops pushed backwards
        int which = 0;
        int i = rlen - 1;
        int k = (i + w + 1 < lq ? i + w + 1 : lq) - 1;
        while (i >= 0 && k >= 0) {
            const int beg = i > w ? i - w : 0;
            const int end = i + w + 1 < lq ? i + w + 1 : lq;
            if (k < beg || k >= end) break;
            which = (z[(i64)i * ncol + k - beg] >> (which << 1)) & 3;
            if (which == 0) {
                fits = fits && push_op(cig, n, 0, 1);
                --i;
                --k;
            } else if (which == 1) {
                fits = fits && push_op(cig, n, 2, 1);
                --i;
            } else {
                fits = fits && push_op(cig, n, 1, 1);
                --k;
            }
        }
        if (i >= 0) fits = fits && push_op(cig, n, 2, i + 1);
        if (k >= 0) fits = fits && push_op(cig, n, 1, k + 1);
        if (fits) {
            for (int a = 0, b = n - 1; a < b; ++a, --b) {
                const u32 t = cig[a];
                cig[a] = cig[b];
                cig[b] = t;
            }
        }
    }
    // NM and MD; leading and trailing deletions count in neither
    int nm = 0, nmd = 0;
    if (fits) {
        int x = 0, y = 0;
        i64 u = 0;
        for (int c = 0; c < n && fits; ++c) {
            const int op = cig[c] & 0xf;
            const int ln = (int)(cig[c] >> 4);
            if (op == 0) {
                for (int t = 0; t < ln && fits; ++t) {
                    if (QS(x + t) != RSEQ(y + t)) {
                        int cc = RSEQ(y + t);
                        if (rev && cc < 4) cc = 3 - cc;
                        fits = put_uint(md, nmd, u) && put_md(md, nmd, BASES[cc]);
                        ++nm;
                        u = 0;
                    } else {
                        ++u;
                    }
                }
                x += ln;
                y += ln;
            } else if (op == 2) {
                if (c > 0 && c < n - 1) {
                    fits = put_uint(md, nmd, u) && put_md(md, nmd, 94);  // '^'
                    for (int t = 0; t < ln && fits; ++t) {
                        int cc = RSEQ(y + t);
                        if (rev && cc < 4) cc = 3 - cc;
                        fits = put_md(md, nmd, BASES[cc]);
                    }
                    u = 0;
                    nm += ln;
                }
                y += ln;
            } else if (op == 1) {
                x += ln;
                nm += ln;
            }
        }
        fits = fits && put_uint(md, nmd, u);
    }
#undef RSEQ
#undef QS
    o.score = score;
    o.nm = nm;
    o.ncig = fits ? n : -1;
    o.nmd = fits ? nmd : 0;
    return o;
}

extern "C" __global__ void mem_cigar_kernel(const u8* __restrict__ seq, const i64* __restrict__ seq_off,
                                            const u8* __restrict__ pac, i64 l_pac, const int* __restrict__ P,
                                            const i8* __restrict__ mat_g, i64 n_job, const i64* __restrict__ J,
                                            u8* ws, int* res, u32* cig_g, u8* md_g) {
    int mat[25];
    for (int k = 0; k < 25; ++k) mat[k] = mat_g[k];
    const int a = P[0], o_del = P[1], e_del = P[2], o_ins = P[3], e_ins = P[4], w = P[5];
    for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < n_job; j += (i64)gridDim.x * blockDim.x) {
        int* r = res + 4 * j;
        r[0] = 0;
        r[1] = 0;
        r[2] = -1;
        r[3] = 0;
        const i64* K = J + J_COLS * j;
        const i64 zoff = K[7];
        if (zoff == -2) continue;
        const i64 qb = K[0], qe = K[1], rb = K[2], re = K[3], truesc = K[4], w_reg = K[5];
        const u8* q = seq + seq_off[K[6]] + qb;
        u32* cig = cig_g + (i64)CAP_CIG * j;
        u8* md = md_g + (i64)CAP_MD * j;
        u8* scratch = zoff >= 0 ? ws + zoff : (u8*)0;
        // samout.region_cigar: the band from the score, doubled while short of truesc
        const i64 tmp = infer_bw(qe - qb, re - rb, truesc, a, o_del, e_del);
        i64 w2 = infer_bw(qe - qb, re - rb, truesc, a, o_ins, e_ins);
        w2 = w2 > tmp ? w2 : tmp;
        if (w2 > w) w2 = w2 < w_reg ? w2 : w_reg;
        int it = 0;
        i64 last_sc = -(1 << 30);
        CgOut o;
        while (true) {
            w2 = w2 < ((i64)w << 2) ? w2 : ((i64)w << 2);
            o = gen_cigar(mat, o_del, e_del, o_ins, e_ins, w2, pac, l_pac, (int)(qe - qb), q, rb, re, scratch, cig,
                          md);
            if (o.score == last_sc || w2 == ((i64)w << 2)) break;
            last_sc = o.score;
            w2 <<= 1;
            ++it;
            if (!(it < 3 && o.score < truesc - a)) break;
        }
        if (o.ncig < 0) continue;
        r[0] = o.score;
        r[1] = o.nm;
        r[2] = o.ncig;
        r[3] = o.nmd;
    }
}

// The computed rows' CIGARs and MDs from their slots into CSR arrays (coff / moff: exclusive prefix sums of
// the rows' lengths, 0 for rows not computed).
extern "C" __global__ void cigar_compact(i64 n_job, const int* __restrict__ res, const u32* __restrict__ cig_g,
                                         const u8* __restrict__ md_g, const i64* __restrict__ coff,
                                         const i64* __restrict__ moff, u32* cig, u8* md) {
    for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < n_job; j += (i64)gridDim.x * blockDim.x) {
        const int nc = res[4 * j + 2];
        if (nc < 0) continue;
        for (int k = 0; k < nc; ++k) cig[coff[j] + k] = cig_g[(i64)CAP_CIG * j + k];
        const int nmd = res[4 * j + 3];
        for (int k = 0; k < nmd; ++k) md[moff[j] + k] = md_g[(i64)CAP_MD * j + k];
    }
}
