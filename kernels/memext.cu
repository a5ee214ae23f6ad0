// Seed extension for `g3align mem` on the GPU: bwa's ksw_extend2 with the band
// doubling of mem_chain2aln, one thread per job (a seed of a kept chain), and rep_len per read.
//
// Job j extends seed (query [sq, sq+sl), reference sr) of read j_read[j] inside its chain's reference
// window [r0, r1) (forward-reverse coordinates, already clipped to one contig and strand): left on the
// reversed prefixes, then right from the left score; X[8j..8j+6] = qb, rb, qe, re, score, truesc, w,
// exactly aligner/mem/extend.py's ext_seed (the numba twin, aligner/memstage.ext_jobs_range).
//
// Scratch: each thread owns one column of (H of the previous row, E) per query position. mem_ext_kernel keeps
// it in global memory `ws` (int2, interleaved across threads, ws[k * T + tid], so a warp's accesses to the
// same query column coalesce); mem_ext_kernel_sh in dynamic shared memory, H and E as the two 16-bit halves
// of one word (the launcher picks it where every score fits: all values are >= 0 and at most twice the
// longest read times the match score), word k of thread t at [k * blockDim.x + t] (no bank conflicts).
// The reference is one byte per base (pac, forward strand); p >= l_pac reads the reverse complement.
typedef unsigned char u8;  // NVRTC has no <stdint.h>
typedef signed char i8;

typedef long long i64;

// P (int32): o_del, e_del, o_ins, e_ins, w, pen_clip5, pen_clip3, zdrop, a
#define P_ODEL 0
#define P_EDEL 1
#define P_OINS 2
#define P_EINS 3
#define P_W 4
#define P_CLIP5 5
#define P_CLIP3 6
#define P_ZDROP 7
#define P_A 8

__device__ __forceinline__ int ref_base(const u8* __restrict__ pac, i64 l_pac, i64 p) {
    return p < l_pac ? (int)pac[p] : 3 - (int)pac[2 * l_pac - 1 - p];
}

// The 5x5 score matrix into shared memory (every thread of the block takes part; then a barrier).
__device__ __forceinline__ void load_mat(int* mat, const i8* __restrict__ mat_g) {
#ifdef __CUDA_ARCH__
    for (int k = threadIdx.x; k < 25; k += blockDim.x) mat[k] = mat_g[k];
    __syncthreads();
#else  // host build of this file (tests): one emulated thread at a time
    for (int k = 0; k < 25; ++k) mat[k] = mat_g[k];
#endif
}

struct ExtOut {
    int best, qle, tle, gtle, gscore, max_off;
};

// The two homes of a thread's scratch column (ksw_ext's WS): global int2 cells at stride T, or shared 16-bit
// pairs at stride S.
struct WsGlobal {
    int2* p;
    i64 T;
    __device__ __forceinline__ int2 get(int j) const { return p[j * T]; }
    __device__ __forceinline__ void set(int j, int h, int e) const { p[j * T] = make_int2(h, e); }
};
struct WsShared16 {
    unsigned* p;
    int S;
    __device__ __forceinline__ int2 get(int j) const {
        const unsigned v = p[j * S];
        return make_int2((int)(v & 0xffffu), (int)(v >> 16));
    }
    __device__ __forceinline__ void set(int j, int h, int e) const { p[j * S] = (unsigned)h | ((unsigned)e << 16); }
};

// ksw_extend2 of query q[qb + qs*j] (j < qlen) against reference (t0 + ts*i) (i < tlen).
template <class WS>
__device__ ExtOut ksw_ext(const u8* __restrict__ q, i64 qb, int qs, int qlen,
                          const u8* __restrict__ pac, i64 l_pac, i64 t0, int ts, int tlen,
                          const int* mat, int mx, int o_del, int e_del, int o_ins, int e_ins, int w,
                          int end_bonus, int zdrop, int h0, const WS ws) {
    const int oe_del = o_del + e_del, oe_ins = o_ins + e_ins;
    {
        int hp = h0 > oe_ins ? h0 - oe_ins : 0;  // row -1: h0 decaying along an insertion
        ws.set(0, h0, 0);
        ws.set(1, hp, 0);
        int j = 2;
        for (; j <= qlen && hp > e_ins; ++j) {
            hp -= e_ins;
            ws.set(j, hp, 0);
        }
        for (; j < qlen + 2; ++j) ws.set(j, 0, 0);
    }
    int max_ins = (int)((double)(qlen * mx + end_bonus - o_ins) / e_ins + 1.0);
    if (max_ins < 1) max_ins = 1;
    if (w > max_ins) w = max_ins;
    int max_del = (int)((double)(qlen * mx + end_bonus - o_del) / e_del + 1.0);
    if (max_del < 1) max_del = 1;
    if (w > max_del) w = max_del;
    int best = h0, max_i = -1, max_j = -1, max_ie = -1, gscore = -1, max_off = 0;
    int beg = 0, end = qlen;
    for (int i = 0; i < tlen; ++i) {
        int f = 0, rmax = 0, mj = -1, h1;
        const int* mrow = mat + 5 * ref_base(pac, l_pac, t0 + (i64)ts * i);
        if (beg < i - w) beg = i - w;
        if (end > i + w + 1) end = i + w + 1;
        if (end > qlen) end = qlen;
        if (beg == 0) {
            h1 = h0 - (o_del + e_del * (i + 1));
            if (h1 < 0) h1 = 0;
        } else {
            h1 = 0;
        }
        for (int j = beg; j < end; ++j) {
            const int2 he = ws.get(j);
            int mm = he.x, e = he.y;
            int h;
            int qc = q[qb + (i64)qs * j];
            mm = mm != 0 ? mm + mrow[qc] : 0;
            h = mm > e ? mm : e;
            h = f > h ? f : h;
            int hout = h1;
            h1 = h;
            if (h >= rmax) {
                mj = j;
                rmax = h;
            }
            int t = mm - oe_del;
            t = t > 0 ? t : 0;
            e -= e_del;
            e = t > e ? t : e;
            ws.set(j, hout, e);
            t = mm - oe_ins;
            t = t > 0 ? t : 0;
            f -= e_ins;
            f = t > f ? t : f;
        }
        ws.set(end, h1, 0);
        int jlast = end > beg ? end : beg;
        if (jlast == qlen && h1 >= gscore) {
            max_ie = i;
            gscore = h1;
        }
        if (rmax == 0) break;
        if (rmax > best) {
            best = rmax;
            max_i = i;
            max_j = mj;
            int d = mj > i ? mj - i : i - mj;
            if (d > max_off) max_off = d;
        } else if (zdrop > 0) {
            if (i - max_i > mj - max_j) {
                if (best - rmax - ((i - max_i) - (mj - max_j)) * e_del > zdrop) break;
            } else {
                if (best - rmax - ((mj - max_j) - (i - max_i)) * e_ins > zdrop) break;
            }
        }
        int j = beg;
        while (j < end) {
            const int2 he = ws.get(j);
            if (he.x != 0 || he.y != 0) break;
            ++j;
        }
        beg = j;
        j = end;
        while (j >= beg) {
            const int2 he = ws.get(j);
            if (he.x != 0 || he.y != 0) break;
            --j;
        }
        end = j + 2 < qlen ? j + 2 : qlen;
    }
    ExtOut o;
    o.best = best;
    o.qle = max_j + 1;
    o.tle = max_i + 1;
    o.gtle = max_ie + 1;
    o.gscore = gscore;
    o.max_off = max_off;
    return o;
}

// One job: left then right extension of seed j into X[8j..8j+7] (WS: the thread's scratch column).
template <class WS>
__device__ __forceinline__ void ext_job(i64 j, const u8* __restrict__ seq, const i64* __restrict__ seq_off,
                                        const u8* __restrict__ pac, i64 l_pac, const int* mat, int mx,
                                        const int* __restrict__ P, const i64* __restrict__ j_read,
                                        const i64* __restrict__ j_sq, const i64* __restrict__ j_sr,
                                        const i64* __restrict__ j_sl, const i64* __restrict__ j_r0,
                                        const i64* __restrict__ j_r1, const WS my, i64* __restrict__ X) {
    const int o_del = P[P_ODEL], e_del = P[P_EDEL], o_ins = P[P_OINS], e_ins = P[P_EINS], w0 = P[P_W];
    const int clip5 = P[P_CLIP5], clip3 = P[P_CLIP3], zdrop = P[P_ZDROP], a = P[P_A];
    const i64 r = j_read[j];
    const u8* q = seq + seq_off[r];
    const int L = (int)(seq_off[r + 1] - seq_off[r]);
    const int sq = (int)j_sq[j], sl = (int)j_sl[j];
    const i64 sr = j_sr[j], r0 = j_r0[j], r1 = j_r1[j];
    int aw0 = w0, aw1 = w0, score = -1, truesc = -1;
    i64 qb_o, rb_o, qe_o, re_o;
    if (sq > 0) {  // left: reversed prefix of the read against the reference before the seed
        const int tlen = (int)(sr - r0);
        ExtOut o;
        o.qle = o.tle = o.gtle = o.gscore = 0;
        for (int t = 0; t < 2; ++t) {
            const int prev = score;
            aw0 = w0 << t;
            o = ksw_ext(q, sq - 1, -1, sq, pac, l_pac, sr - 1, -1, tlen, mat, mx, o_del, e_del, o_ins, e_ins,
                        aw0, clip5, zdrop, sl * a, my);
            score = o.best;
            if (score == prev || o.max_off < (aw0 >> 1) + (aw0 >> 2)) break;
        }
        if (o.gscore <= 0 || o.gscore <= score - clip5) {
            qb_o = sq - o.qle;
            rb_o = sr - o.tle;
            truesc = score;
        } else {
            qb_o = 0;
            rb_o = sr - o.gtle;
            truesc = o.gscore;
        }
    } else {
        score = sl * a;
        truesc = score;
        qb_o = 0;
        rb_o = sr;
    }
    if (sq + sl != L) {  // right: the rest of the read from the left score
        const int qe = sq + sl;
        const i64 re = sr + sl;
        const int tlen = (int)(r1 - re);
        const int sc0 = score;
        ExtOut o;
        o.qle = o.tle = o.gtle = o.gscore = 0;
        for (int t = 0; t < 2; ++t) {
            const int prev = score;
            aw1 = w0 << t;
            o = ksw_ext(q, qe, 1, L - qe, pac, l_pac, re, 1, tlen, mat, mx, o_del, e_del, o_ins, e_ins, aw1,
                        clip3, zdrop, sc0, my);
            score = o.best;
            if (score == prev || o.max_off < (aw1 >> 1) + (aw1 >> 2)) break;
        }
        if (o.gscore <= 0 || o.gscore <= score - clip3) {
            qe_o = qe + o.qle;
            re_o = re + o.tle;
            truesc += score - sc0;
        } else {
            qe_o = L;
            re_o = re + o.gtle;
            truesc += o.gscore - sc0;
        }
    } else {
        qe_o = L;
        re_o = sr + sl;
    }
    i64* x = X + 8 * j;
    x[0] = qb_o;
    x[1] = rb_o;
    x[2] = qe_o;
    x[3] = re_o;
    x[4] = score;
    x[5] = truesc;
    x[6] = aw0 > aw1 ? aw0 : aw1;
    x[7] = 0;
}

__device__ __forceinline__ int mat_max(const int* mat) {
    int mx = 0;
    for (int k = 0; k < 25; ++k) mx = mat[k] > mx ? mat[k] : mx;
    return mx;
}

// Scratch in global memory: one int2 column of (longest read + 2) cells per thread (any scores).
extern "C" __global__ void mem_ext_kernel(const u8* __restrict__ seq, const i64* __restrict__ seq_off,
                                          const u8* __restrict__ pac, i64 l_pac,
                                          const int* __restrict__ P, const i8* __restrict__ mat_g,
                                          const i64* __restrict__ order, i64 n_job,
                                          const i64* __restrict__ j_read, const i64* __restrict__ j_sq,
                                          const i64* __restrict__ j_sr, const i64* __restrict__ j_sl,
                                          const i64* __restrict__ j_r0, const i64* __restrict__ j_r1,
                                          int2* ws, i64* __restrict__ X) {
    __shared__ int mat[25];
    load_mat(mat, mat_g);
    const int mx = mat_max(mat);
    const i64 T = (i64)gridDim.x * blockDim.x;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    WsGlobal my;
    my.p = ws + tid;
    my.T = T;
    for (i64 k = tid; k < n_job; k += T)
        ext_job(order[k], seq, seq_off, pac, l_pac, mat, mx, P, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, my, X);
}

// Scratch in dynamic shared memory: blockDim.x * (longest read + 2) 32-bit words, 16-bit H and E (the launcher
// checks that every score fits). The host build of this file (tests) passes the block's words in g3_host_smem.
extern "C" __global__ void mem_ext_kernel_sh(const u8* __restrict__ seq, const i64* __restrict__ seq_off,
                                             const u8* __restrict__ pac, i64 l_pac,
                                             const int* __restrict__ P, const i8* __restrict__ mat_g,
                                             const i64* __restrict__ order, i64 n_job,
                                             const i64* __restrict__ j_read, const i64* __restrict__ j_sq,
                                             const i64* __restrict__ j_sr, const i64* __restrict__ j_sl,
                                             const i64* __restrict__ j_r0, const i64* __restrict__ j_r1,
                                             i64* __restrict__ X) {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    extern __shared__ unsigned ext_sh[];
#else
    unsigned* ext_sh = g3_host_smem;
#endif
    __shared__ int mat[25];
    load_mat(mat, mat_g);
    const int mx = mat_max(mat);
    const i64 T = (i64)gridDim.x * blockDim.x;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    WsShared16 my;
    my.p = ext_sh + threadIdx.x;
    my.S = (int)blockDim.x;
    for (i64 k = tid; k < n_job; k += T)
        ext_job(order[k], seq, seq_off, pac, l_pac, mat, mx, P, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, my, X);
}

// rep_len per read over the batch's CSR intervals (aligner.chain.rep_len): bases covered by intervals
// with more than max_occ occurrences.
extern "C" __global__ void rep_len_kernel(const i64* __restrict__ mb, const i64* __restrict__ me,
                                          const i64* __restrict__ ms, const i64* __restrict__ off, i64 n,
                                          i64 max_occ, i64* __restrict__ fr) {
    const i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    i64 b = 0, e = 0, l_rep = 0;
    for (i64 i = off[r]; i < off[r + 1]; ++i) {
        if (ms[i] <= max_occ) continue;
        const i64 sb = mb[i], se = me[i];
        if (sb > e) {
            l_rep += e - b;
            b = sb;
            e = se;
        } else {
            e = e > se ? e : se;
        }
    }
    fr[r] = l_rep + (e - b);
}

// ------------------------------------------------------------------------------------------------
// Mate rescue (bwa's mem_matesw): ksw_align2 of the mate (or its reverse complement) against a
// reference window, one thread per job; the plain (non-striped) recursion of aligner/mem/ksw.py's
// _sw_pass with its 8-bit (KSW_XBYTE: biased, saturating at 255) or 16-bit emulation and the query
// padded to the SIMD width, then the reverse pass for the start (KSW_XSTART). Used only when
// o_ins > 0 (the launcher leaves o_ins <= 0 to the CPU). R[8k..8k+6] = score, te, qe, score2, te2, tb, qb.
// Scratch: three interleaved int rows per thread (ws: H of the previous row, H of this row, E) of
// `nmax` cells each; the row-maximum list of every job in bl (2 * (tlen + 1) ints at bl_off[k]).
#define KSW_XBYTE 0x10000
#define KSW_XSTOP 0x20000
#define KSW_XSUBO 0x40000
#define KSW_XSTART 0x80000

struct SwOut {
    int score, te, qe, score2, te2;
};

// A pass's result from its best score (gmax at target row te, query qe) and row-maximum list
// (bsc/bte, n_b entries): the sub-optimal score outside te +- the best score's span; 8-bit saturation.
__device__ __forceinline__ SwOut sw_finish(int gmax, int te, int qe, int n_b, int byte_, int shift, int qmax,
                                           const int* bsc, const int* bte) {
    SwOut o;
    o.te = te;
    if (byte_ && gmax + shift >= 255) {
        o.score = 255;
        o.qe = -1;
        o.score2 = -1;
        o.te2 = -1;
        return o;
    }
    int score2 = -1, te2 = -1;
    if (n_b > 0) {
        const int r = (gmax + qmax - 1) / qmax;
        const int low = te - r, high = te + r;
        for (int x = 0; x < n_b; ++x) {
            const int e = bte[x];
            if ((e < low || e > high) && bsc[x] > score2) {
                score2 = bsc[x];
                te2 = e;
            }
        }
    }
    o.score = gmax;
    o.qe = qe;
    o.score2 = score2;
    o.te2 = te2;
    return o;
}

// query(j) = mate base j of the aligned orientation, reversed when qrev (reverse pass);
// target(i) = reference rb + i, with its first tfl + 1 bases reversed (reverse pass) when tfl >= 0.
__device__ __forceinline__ int sw_q(const u8* __restrict__ ms, int l_ms, int is_rev, int qrev_end, int j) {
    const int x = qrev_end >= 0 ? qrev_end - j : j;
    if (!is_rev) return ms[x];
    const int c = ms[l_ms - 1 - x];
    return c < 4 ? 3 - c : 4;
}

__device__ SwOut sw_pass(const u8* __restrict__ ms, int l_ms, int is_rev, int qrev_end, int qlen,
                         const u8* __restrict__ pac, i64 l_pac, i64 rb, int tfl, int tlen, const int* mat,
                         int mn, int mxs, int o_del, int e_del, int o_ins, int e_ins, int xtra, int byte_,
                         int* ws, i64 T, int nmax, int* bsc, int* bte) {
    const int p = byte_ ? 16 : 8;
    const int slen = (qlen + p - 1) / p;
    const int nlen = slen * p;
    const int qmax = mxs & 0xff;
    int shift, cap;
    if (byte_) {
        shift = (256 - (mn & 0xff)) & 0xff;
        cap = 255;
    } else {
        shift = 0;
        cap = 32767;
    }
    int* hprev = ws;
    int* hcur = ws + (i64)nmax * T;
    int* erow = ws + 2 * (i64)nmax * T;
    for (int j = 0; j < nlen; ++j) {
        hprev[j * T] = 0;
        erow[j * T] = 0;
    }
    const int minsc = (xtra & KSW_XSUBO) ? (xtra & 0xffff) : 0x10000;
    const int endsc = (xtra & KSW_XSTOP) ? (xtra & 0xffff) : 0x10000;
    const int oe_del = o_del + e_del, oe_ins = o_ins + e_ins;
    int gmax = 0, te = -1, qe = nlen > 0 ? 0 : -1, n_b = 0;
    for (int i = 0; i < tlen; ++i) {
        const i64 ti = (tfl >= 0 && i <= tfl) ? tfl - i : i;
        const int* mrow = mat + 5 * ref_base(pac, l_pac, rb + ti);
        int diag = 0, f = 0, imax = 0;
        for (int j = 0; j < nlen; ++j) {
            int s = j < qlen ? mrow[sw_q(ms, l_ms, is_rev, qrev_end, j)] : 0;
            if (byte_) s = (s + shift) & 0xff;
            int mm = diag + s;
            mm = mm > cap ? cap : mm;
            mm -= shift;
            mm = mm < 0 ? 0 : mm;
            diag = hprev[j * T];
            int e = erow[j * T];
            int h = mm > e ? mm : e;
            h = f > h ? f : h;
            hcur[j * T] = h;
            imax = h > imax ? h : imax;
            e -= e_del;
            e = e < 0 ? 0 : e;
            int t = h - oe_del;
            e = t > e ? t : e;
            erow[j * T] = e;
            f -= e_ins;
            f = f < 0 ? 0 : f;
            t = h - oe_ins;
            f = t > f ? t : f;
        }
        if (imax >= minsc) {
            if (n_b == 0 || bte[n_b - 1] + 1 != i) {
                bsc[n_b] = imax;
                bte[n_b] = i;
                ++n_b;
            } else if (bsc[n_b - 1] < imax) {
                bsc[n_b - 1] = imax;
                bte[n_b - 1] = i;
            }
        }
        if (imax > gmax) {
            gmax = imax;
            te = i;
            int best = -1;
            for (int j = 0; j < nlen; ++j) {
                const int h = hcur[j * T];
                if (h > best) {
                    best = h;
                    qe = j;
                }
            }
            if (gmax >= endsc || (byte_ && gmax + shift >= 255)) break;
        }
        int* tmp = hprev;
        hprev = hcur;
        hcur = tmp;
    }
    return sw_finish(gmax, te, qe, n_b, byte_, shift, qmax, bsc, bte);
}

// ------------------------------------------------------------------------------------------------
// Mate rescue, one warp per job (mem_sw_warp<C>): the same sw_pass results, computed as a wavefront
// along the warp. Lane l keeps query columns [l*C, l*C + C) of the padded query in registers (H of
// the previous target row, E, the query codes) and works on target row s - l at step s; lane l - 1
// hands it, through one shuffle per value, the row's F and H leaving its last column (the next row's
// diagonal), the running row maximum packed as h * 256 + (255 - j) (first column wins ties, as the
// plain scan) and the row's target base. The last active lane owns the per-row bookkeeping (gmax, te,
// qe, the row-maximum list for the sub-optimal score, the stop of KSW_XSTOP / 8-bit saturation) in
// row order, so the result equals sw_pass's cell for cell. Padded query length <= 32 * C <= 256.
// The host build (tests) runs the 32 lanes of a warp in lock step (sw_pass_warp's #else branch).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define G3_REAL_WARP 1
#endif

template <int C>
struct SwLane {
    int hp[C], e[C], qs[C];  // H(i-1, j), E(i, j), query code of column j (-1: padding, score 0)
    int cnt, diag;           // active columns; H(i-1, j0-1)
};

struct SwRow {
    int fh, mx;  // F | H(i, last column) << 16; packed running row maximum
};

struct SwBook {
    int gmax, te, qe, n_b, stop;
};

template <int C>
__device__ __forceinline__ void sw_lane_init(SwLane<C>& L, int lane, const u8* __restrict__ ms, int l_ms,
                                             int is_rev, int qrev_end, int qlen, int nlen) {
    const int j0 = lane * C;
    const int c = nlen - j0;
    L.cnt = c < 0 ? 0 : (c > C ? C : c);
    L.diag = 0;
#pragma unroll
    for (int k = 0; k < C; ++k) {
        L.hp[k] = 0;
        L.e[k] = 0;
        L.qs[k] = (k < L.cnt && j0 + k < qlen) ? sw_q(ms, l_ms, is_rev, qrev_end, j0 + k) : -1;
    }
}

// One target row (base t) over the lane's columns, given the left lane's message for that row.
template <int C>
__device__ __forceinline__ SwRow sw_lane_row(SwLane<C>& L, int lane, int t, SwRow in, const int* mat, int byte_,
                                             int shift, int cap, int e_del, int oe_del, int e_ins, int oe_ins) {
    int f = in.fh & 0xffff;
    int diag = L.diag;
    L.diag = in.fh >> 16;
    int best = in.mx, hl = 0;
    const int* mrow = mat + 5 * t;
    const int j0 = lane * C;
#pragma unroll
    for (int k = 0; k < C; ++k) {
        if (k < L.cnt) {
            int s = L.qs[k] >= 0 ? mrow[L.qs[k]] : 0;
            if (byte_) s = (s + shift) & 0xff;
            int mm = diag + s;
            mm = mm > cap ? cap : mm;
            mm -= shift;
            mm = mm < 0 ? 0 : mm;
            diag = L.hp[k];
            int e = L.e[k];
            int h = mm > e ? mm : e;
            h = f > h ? f : h;
            L.hp[k] = h;
            hl = h;
            const int key = h * 256 + (255 - (j0 + k));
            best = key > best ? key : best;
            e -= e_del;
            e = e < 0 ? 0 : e;
            int u = h - oe_del;
            L.e[k] = u > e ? u : e;
            f -= e_ins;
            f = f < 0 ? 0 : f;
            u = h - oe_ins;
            f = u > f ? u : f;
        }
    }
    SwRow o;
    o.fh = f | (hl << 16);
    o.mx = best;
    return o;
}

// Row i's maximum (packed key) in row order: sw_pass's per-row bookkeeping.
__device__ __forceinline__ void sw_book_row(SwBook& B, int i, int key, int minsc, int endsc, int byte_, int shift,
                                            int* bsc, int* bte) {
    const int imax = key < 0 ? 0 : key >> 8;
    if (imax >= minsc) {
        if (B.n_b == 0 || bte[B.n_b - 1] + 1 != i) {
            bsc[B.n_b] = imax;
            bte[B.n_b] = i;
            ++B.n_b;
        } else if (bsc[B.n_b - 1] < imax) {
            bsc[B.n_b - 1] = imax;
            bte[B.n_b - 1] = i;
        }
    }
    if (imax > B.gmax) {
        B.gmax = imax;
        B.te = i;
        B.qe = 255 - (key & 255);
        if (B.gmax >= endsc || (byte_ && B.gmax + shift >= 255)) B.stop = 1;
    }
}

__device__ __forceinline__ int sw_target(const u8* __restrict__ pac, i64 l_pac, i64 rb, int tfl, int i) {
    const i64 ti = (tfl >= 0 && i <= tfl) ? tfl - i : i;
    return ref_base(pac, l_pac, rb + ti);
}

template <int C>
__device__ SwOut sw_pass_warp(int lane, const u8* __restrict__ ms, int l_ms, int is_rev, int qrev_end, int qlen,
                              const u8* __restrict__ pac, i64 l_pac, i64 rb, int tfl, int tlen, const int* mat,
                              int mn, int mxs, int o_del, int e_del, int o_ins, int e_ins, int xtra, int byte_,
                              int* bsc, int* bte) {
    const int p = byte_ ? 16 : 8;
    const int nlen = (qlen + p - 1) / p * p;
    const int qmax = mxs & 0xff;
    const int shift = byte_ ? (256 - (mn & 0xff)) & 0xff : 0;
    const int cap = byte_ ? 255 : 32767;
    const int minsc = (xtra & KSW_XSUBO) ? (xtra & 0xffff) : 0x10000;
    const int endsc = (xtra & KSW_XSTOP) ? (xtra & 0xffff) : 0x10000;
    const int oe_del = o_del + e_del, oe_ins = o_ins + e_ins;
    const int last = nlen > 0 ? (nlen - 1) / C : 0;  // the lane that completes each row
    SwBook B;
    B.gmax = 0;
    B.te = -1;
    B.qe = nlen > 0 ? 0 : -1;
    B.n_b = 0;
    B.stop = 0;
#ifdef G3_REAL_WARP
    SwLane<C> L;
    sw_lane_init<C>(L, lane, ms, l_ms, is_rev, qrev_end, qlen, nlen);
    SwRow out;
    out.fh = 0;
    out.mx = -1;
    int tout = 0;
    for (int s = 0; s < tlen + last; ++s) {
        SwRow in;
        in.fh = __shfl_up_sync(0xffffffffu, out.fh, 1);
        in.mx = __shfl_up_sync(0xffffffffu, out.mx, 1);
        int t = __shfl_up_sync(0xffffffffu, tout, 1);
        if (lane == 0) {
            in.fh = 0;
            in.mx = -1;
            t = s < tlen ? sw_target(pac, l_pac, rb, tfl, s) : 0;
        }
        const int i = s - lane;
        if (lane <= last && i >= 0 && i < tlen) {
            out = sw_lane_row<C>(L, lane, t, in, mat, byte_, shift, cap, e_del, oe_del, e_ins, oe_ins);
            tout = t;
            if (lane == last) sw_book_row(B, i, out.mx, minsc, endsc, byte_, shift, bsc, bte);
        }
        if (__shfl_sync(0xffffffffu, B.stop, last)) break;
    }
    B.gmax = __shfl_sync(0xffffffffu, B.gmax, last);
    B.te = __shfl_sync(0xffffffffu, B.te, last);
    B.qe = __shfl_sync(0xffffffffu, B.qe, last);
    B.n_b = __shfl_sync(0xffffffffu, B.n_b, last);
    __syncwarp();
#else  // host build: the warp's 32 lanes in lock step, messages double-buffered as the shuffles
    (void)lane;
    SwLane<C> L[32];
    SwRow out[32], prev[32];
    int tout[32], tprev[32];
    for (int l = 0; l < 32; ++l) {
        sw_lane_init<C>(L[l], l, ms, l_ms, is_rev, qrev_end, qlen, nlen);
        out[l].fh = 0;
        out[l].mx = -1;
        tout[l] = 0;
    }
    for (int s = 0; s < tlen + last; ++s) {
        for (int l = 0; l < 32; ++l) {
            prev[l] = out[l];
            tprev[l] = tout[l];
        }
        for (int l = 0; l < 32; ++l) {
            SwRow in;
            int t;
            if (l == 0) {
                in.fh = 0;
                in.mx = -1;
                t = s < tlen ? sw_target(pac, l_pac, rb, tfl, s) : 0;
            } else {
                in = prev[l - 1];
                t = tprev[l - 1];
            }
            const int i = s - l;
            if (l <= last && i >= 0 && i < tlen) {
                out[l] = sw_lane_row<C>(L[l], l, t, in, mat, byte_, shift, cap, e_del, oe_del, e_ins, oe_ins);
                tout[l] = t;
                if (l == last) sw_book_row(B, i, out[l].mx, minsc, endsc, byte_, shift, bsc, bte);
            }
        }
        if (B.stop) break;
    }
#endif
    return sw_finish(B.gmax, B.te, B.qe, B.n_b, byte_, shift, qmax, bsc, bte);
}

// Scores and gap penalties of the rescue kernels; the 5x5 matrix into shared memory first.
struct SwSet {
    int mn, mxs, o_del, e_del, o_ins, e_ins;
};

__device__ __forceinline__ SwSet sw_setup(int* mat, const i8* __restrict__ mat_g, const int* __restrict__ P) {
    load_mat(mat, mat_g);
    SwSet S;
    S.mn = 127;
    S.mxs = 0;
    for (int k = 0; k < 25; ++k) {
        S.mn = mat[k] < S.mn ? mat[k] : S.mn;
        S.mxs = mat[k] > S.mxs ? mat[k] : S.mxs;
    }
    S.o_del = P[P_ODEL];
    S.e_del = P[P_EDEL];
    S.o_ins = P[P_OINS];
    S.e_ins = P[P_EINS];
    return S;
}

// One pass of job k: C == 0 one thread (sw_pass, scratch column `ws` of stride T), else the warp.
template <int C>
__device__ __forceinline__ SwOut sw_any(int lane, int* ws, i64 T, int nmax, const u8* __restrict__ ms, int l_ms,
                                        int is_rev, int qrev_end, int qlen, const u8* __restrict__ pac, i64 l_pac,
                                        i64 rb, int tfl, int tlen, const int* mat, const SwSet& S, int xtra,
                                        int byte_, int* bsc, int* bte) {
    if constexpr (C == 0) {
        (void)lane;
        return sw_pass(ms, l_ms, is_rev, qrev_end, qlen, pac, l_pac, rb, tfl, tlen, mat, S.mn, S.mxs, S.o_del,
                       S.e_del, S.o_ins, S.e_ins, xtra, byte_, ws, T, nmax, bsc, bte);
    } else {
        (void)ws;
        (void)T;
        (void)nmax;
        return sw_pass_warp<C>(lane, ms, l_ms, is_rev, qrev_end, qlen, pac, l_pac, rb, tfl, tlen, mat, S.mn, S.mxs,
                               S.o_del, S.e_del, S.o_ins, S.e_ins, xtra, byte_, bsc, bte);
    }
}

// Rescue job k (ksw_align2 with KSW_XSUBO / KSW_XSTART as mem_matesw asks): the forward pass, the
// reverse pass for the start, R[8k..8k+7] written by lane 0.
template <int C>
__device__ __forceinline__ void sw_job(i64 k, int lane, int* ws, i64 T, int nmax, const u8* __restrict__ seq,
                                       const i64* __restrict__ seq_off, const u8* __restrict__ pac, i64 l_pac,
                                       const int* mat, const SwSet& S, const i64* __restrict__ mate,
                                       const i64* __restrict__ wrb, const i64* __restrict__ wre,
                                       const i64* __restrict__ wrev, const i64* __restrict__ wx,
                                       const i64* __restrict__ bl_off, int* bl, i64* __restrict__ R) {
    const i64 m = mate[k];
    const u8* ms = seq + seq_off[m];
    const int l_ms = (int)(seq_off[m + 1] - seq_off[m]);
    const int is_rev = (int)wrev[k], xtra = (int)wx[k];
    const i64 rb = wrb[k];
    const int tlen = (int)(wre[k] - rb);
    const int byte_ = (xtra & KSW_XBYTE) != 0;
    int* bsc = bl + bl_off[k];
    int* bte = bsc + (tlen + 1);
    SwOut a = sw_any<C>(lane, ws, T, nmax, ms, l_ms, is_rev, -1, l_ms, pac, l_pac, rb, -1, tlen, mat, S, xtra, byte_,
                        bsc, bte);
    int tb = -1, qb = -1;
    if (!((xtra & KSW_XSTART) == 0 || ((xtra & KSW_XSUBO) != 0 && a.score < (xtra & 0xffff)))) {
        SwOut b = sw_any<C>(lane, ws, T, nmax, ms, l_ms, is_rev, a.qe, a.qe + 1, pac, l_pac, rb, a.te, tlen, mat, S,
                            KSW_XSTOP | a.score, byte_, bsc, bte);
        if (b.score == a.score) {
            tb = a.te - b.te;
            qb = a.qe - b.qe;
        }
    }
    if (lane == 0) {
        i64* o = R + 8 * k;
        o[0] = a.score;
        o[1] = a.te;
        o[2] = a.qe;
        o[3] = a.score2;
        o[4] = a.te2;
        o[5] = tb;
        o[6] = qb;
        o[7] = 0;
    }
}

// One thread per job. Scratch: three interleaved int rows per thread (sw_pass) of `nmax` cells each;
// the row-maximum list of job k in bl (2 * (tlen + 1) ints at bl_off[k]).
extern "C" __global__ void mem_sw_kernel(const u8* __restrict__ seq, const i64* __restrict__ seq_off,
                                         const u8* __restrict__ pac, i64 l_pac, const int* __restrict__ P,
                                         const i8* __restrict__ mat_g, const i64* __restrict__ order, i64 n_job,
                                         const i64* __restrict__ mate, const i64* __restrict__ wrb,
                                         const i64* __restrict__ wre, const i64* __restrict__ wrev,
                                         const i64* __restrict__ wx, const i64* __restrict__ bl_off,
                                         int* ws, int nmax, int* bl, i64* __restrict__ R) {
    __shared__ int mat[25];
    const SwSet S = sw_setup(mat, mat_g, P);
    const i64 T = (i64)gridDim.x * blockDim.x;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 kk = tid; kk < n_job; kk += T)
        sw_job<0>(order[kk], 0, ws + tid, T, nmax, seq, seq_off, pac, l_pac, mat, S, mate, wrb, wre, wrev, wx, bl_off,
                  bl, R);
}

// mem_sw_kernel's jobs, one warp each (jobs with mates of at most 32 * C padded bases).
template <int C>
__device__ void mem_sw_warp_body(const u8* __restrict__ seq, const i64* __restrict__ seq_off,
                                 const u8* __restrict__ pac, i64 l_pac, const int* __restrict__ P,
                                 const i8* __restrict__ mat_g, const i64* __restrict__ order, i64 n_job,
                                 const i64* __restrict__ mate, const i64* __restrict__ wrb,
                                 const i64* __restrict__ wre, const i64* __restrict__ wrev,
                                 const i64* __restrict__ wx, const i64* __restrict__ bl_off, int* bl,
                                 i64* __restrict__ R) {
    __shared__ int mat[25];
    const SwSet S = sw_setup(mat, mat_g, P);
    const int lane = (int)(threadIdx.x & 31);
#ifndef G3_REAL_WARP
    if (lane != 0) return;  // host build: lane 0's call runs the whole warp
#endif
    const i64 n_warp = ((i64)gridDim.x * blockDim.x) >> 5;
    const i64 wid = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    for (i64 kk = wid; kk < n_job; kk += n_warp)
        sw_job<C>(order[kk], lane, nullptr, 0, 0, seq, seq_off, pac, l_pac, mat, S, mate, wrb, wre, wrev, wx, bl_off,
                  bl, R);
}

#define G3_SW_WARP(C)                                                                                          \
    extern "C" __global__ void mem_sw_warp##C(                                                                 \
        const u8* __restrict__ seq, const i64* __restrict__ seq_off, const u8* __restrict__ pac, i64 l_pac,    \
        const int* __restrict__ P, const i8* __restrict__ mat_g, const i64* __restrict__ order, i64 n_job,     \
        const i64* __restrict__ mate, const i64* __restrict__ wrb, const i64* __restrict__ wre,                \
        const i64* __restrict__ wrev, const i64* __restrict__ wx, const i64* __restrict__ bl_off, int* bl,     \
        i64* __restrict__ R) {                                                                                 \
        mem_sw_warp_body<C>(seq, seq_off, pac, l_pac, P, mat_g, order, n_job, mate, wrb, wre, wrev, wx, bl_off, \
                            bl, R);                                                                            \
    }
G3_SW_WARP(1)
G3_SW_WARP(2)
G3_SW_WARP(3)
G3_SW_WARP(4)
G3_SW_WARP(5)
G3_SW_WARP(6)
G3_SW_WARP(7)
G3_SW_WARP(8)
