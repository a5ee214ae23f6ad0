// minimap2 2.24's ksw_extd2_sse (extension / global alignment with two affine gap models and Z-drop) for
// a batch of jobs: ONE WARP PER JOB, bit-exact with aligner/ksw2.py's extd2 (its CPU twin and the oracle
// of the tests; that module explains the SSE kernel's layout).
//
// Thread mapping. The DP is filled one anti-diagonal r = t + j at a time (t target, j query), as the SSE
// kernel does. The cells of an anti-diagonal depend only on the previous one, so the warp takes its
// widened band [st, en] in chunks of 128 consecutive target positions, 4 per lane (one 32-bit load and
// store per array and lane). A cell also needs its left neighbour's values from before the update (x, v,
// x2 at t-1): within a lane from its previous cell, across lanes by a shuffle, for lane 0 from the
// previous chunk's lane 31 (or x1/v1/x21 on the first chunk). The arrays are updated in place with the SSE
// kernel's life cycle (stale values of the widened blocks included), so every ez field and the CIGAR equal
// the SSE kernel's. Per anti-diagonal the exact maximum is one warp max-reduction of a packed key that
// encodes the SSE code's tie order; the approximate (greedy path) maximum and Z-drop are uniform code.
//
// Band buffers. The SSE kernel's arrays are indexed by target position; a position left of st - 1 is never
// read again and one right of every band so far still holds its initial value. So the 7 byte arrays
// (u v x y x2 y2 s) and H live in circular buffers of W = 2^k >= band + 64 slots (slot = t & (W-1)): a
// position gets its initial values when it first enters (the highest position touched so far, `hiw`,
// grows), and the live window [st - 1, hiw] never exceeds band + 31 slots. They are in shared memory
// (11*W bytes per warp) when W fits the launch's per-warp share, else in the warp's global scratch.
//
// Gridded traceback. The forward pass keeps no direction matrix. Before every G-th anti-diagonal it saves
// the 7 byte buffers and hiw (a checkpoint: 7*W + 16 bytes). The traceback walks the path back block by
// block: it restores the block's checkpoint, recomputes the block's anti-diagonals with their direction
// bits into a G x pw buffer, and follows the path through it. The recomputed bits equal the forward pass's
// (same inputs, same operations), so the CIGAR is minimap2's. Memory per warp: ceil(nr/G)*(7W+16) + G*pw
// bytes (+ 11*W when the buffers are global) instead of nr*band for the whole direction matrix.
//
// Scheduling: warps take jobs from `order` with an atomic counter (largest first); each warp owns
// `warp_bytes` of global scratch. Code shape: kernels/warp.cuh (one source for the GPU and for the host
// build of the tests, which runs a warp's 32 lanes in lock step).
#include "warp.cuh"

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned int u32;

#define KSW2_NEG_INF (-0x40000000)
// ez fields (aligner/mm_types.py)
#define EZ_MAX 0
#define EZ_ZDROPPED 1
#define EZ_MAX_Q 2
#define EZ_MAX_T 3
#define EZ_MQE 4
#define EZ_MQE_T 5
#define EZ_MTE 6
#define EZ_MTE_Q 7
#define EZ_SCORE 8
#define EZ_REACH_END 9
#define EZ_N 10
// ksw2 flags
#define KSW_EZ_SCORE_ONLY 0x01
#define KSW_EZ_RIGHT 0x02
#define KSW_EZ_APPROX_MAX 0x08
#define KSW_EZ_APPROX_DROP 0x10
#define KSW_EZ_EXTZ_ONLY 0x40
#define KSW_EZ_REV_CIGAR 0x80
// job rows (aligner/ksw2_gpu.py J_*): the query is Q[q_off, q_off + q_len) read backwards when
// q_mode & 1 and complemented when q_mode & 2; the target likewise from T
#define J_Q_OFF 0
#define J_Q_LEN 1
#define J_Q_MODE 2
#define J_T_OFF 3
#define J_T_LEN 4
#define J_T_MODE 5
#define J_W 6
#define J_ZDROP 7
#define J_END_BONUS 8
#define J_FLAG 9
#define J_PSET 10
#define J_NF 12
// parameter sets: q e q2 e2, then the 5 x 5 score matrix (row-major)
#define P_NF 29
// errors (bits of *err)
#define KSW2_ERR_GEOMETRY 1

__device__ __forceinline__ int s8(int x) { return (int)(i8)x; }
__device__ __forceinline__ int byte_of(u32 w, int k) { return (int)(i8)(w >> (8 * k)); }

struct Ksw2Job {
    const u8 *q, *t;
    int qlen, tlen;
    int q_mode, t_mode;
};

// the query's k-th base as the job sees it (reversed / complemented views of the source bytes)
__device__ __forceinline__ int job_base(const u8* src, int len, int mode, int k) {
    int c = src[(mode & 1) ? len - 1 - k : k];
    if (mode & 2) c = c < 4 ? 3 - c : 4;
    return c;
}

struct Ksw2Band {
    int st0, en0, st, en;  // the band of one anti-diagonal, then widened to whole 16-byte blocks
};

__device__ __forceinline__ Ksw2Band band_of(int r, int qlen, int tlen, int w) {
    Ksw2Band b;
    b.st0 = 0;
    b.en0 = tlen - 1;
    if (b.st0 < r - qlen + 1) b.st0 = r - qlen + 1;
    if (b.en0 > r) b.en0 = r;
    if (b.st0 < (r - w + 1) >> 1) b.st0 = (r - w + 1) >> 1;
    if (b.en0 > (r + w) >> 1) b.en0 = (r + w) >> 1;
    b.st = b.st0 / 16 * 16;
    b.en = (b.en0 + 16) / 16 * 16 - 1;
    return b;
}

// The buffer and scratch geometry of a job (aligner/ksw2_gpu.py job_geometry computes the same):
// W (circular slots), pw (direction row stride), n_blk (checkpoints), ck (bytes per checkpoint).
struct Ksw2Geo {
    int W, pw, rows;
    i64 n_blk, ck;
};

__device__ __forceinline__ Ksw2Geo geometry(int qlen, int tlen, int w, int G) {
    Ksw2Geo g;
    const int T = (tlen + 15) / 16 * 16, nr = qlen + tlen - 1;
    int band = qlen < tlen ? qlen : tlen;
    if (band > w + 2) band = w + 2;
    g.W = 128;
    while (g.W < band + 64) g.W <<= 1;
    g.pw = band + 30 < T ? band + 30 : T;
    g.pw = (g.pw + 15) / 16 * 16;
    g.n_blk = (nr + G - 1) / G;
    g.ck = 7 * g.W + 16;
    g.rows = nr < G ? nr : G;
    return g;
}

// scores and gap constants after ksw_extd2_sse's swap of the two gap models
struct Ksw2Sc {
    int q_v, q2_v, qe_v, qe2_v, sc_mch, sc_mis, sc_N, init1, init2, e, e2;
    int long_thres, long_diff, qe;  // qe: q + e taken before the swap (the r == 0 score)
};

// the circular band buffers: 7 byte arrays of W slots, then H (int32 x W)
struct Ksw2Buf {
    u8* b;  // u v x y x2 y2 s, W bytes each
    int* H;
    int mask;  // W - 1
};

#define B_U 0
#define B_V 1
#define B_X 2
#define B_Y 3
#define B_X2 4
#define B_Y2 5
#define B_S 6

__device__ __forceinline__ i8* arr(const Ksw2Buf& B, int k) { return (i8*)(B.b + k * (B.mask + 1)); }
__device__ __forceinline__ int slot(const Ksw2Buf& B, int t) { return t & B.mask; }
// Array k's value at slot i, read as the aligned 32-bit word that holds it. Every byte of the buffers is read
// this way: on the H100 (sm_90, CUDA 13) a plain per-lane signed-byte load of them in the exact-maximum loop
// came out as the byte shifted left by 24 bits (0xF8 -> 0xF8000000), while the word loads were right.
__device__ __forceinline__ int buf_at(const Ksw2Buf& B, int k, int i) {
    return byte_of(*(const u32*)(B.b + k * (B.mask + 1) + (i & ~3)), i & 3);
}

// u[r] / v1 on the band's first column: the score of an all-gap prefix of length r, as differences
__device__ __forceinline__ int edge_val(int r, const Ksw2Sc& S) {
    if (r == 0) return S.init1;
    if (r < S.long_thres) return s8(-S.e);
    if (r == S.long_thres) return s8((int)S.long_diff);
    return s8(-S.e2);
}

// One DP cell (aligner/ksw2.py _d2_cells): old u, y, y2 at t and the left neighbour's old x, v, x2 in;
// new values out; returns the direction byte (mode 0: a state wins only when strictly better, else ties go
// to the later state).
__device__ __forceinline__ int d2_cell(int mode, const Ksw2Sc& S, int z, int xl, int vl, int x2l, int& u, int& v,
                                       int& x, int& y, int& x2, int& y2) {
    const int vp = vl, ut = u;
    int a = s8(xl + vp), b = s8(y + ut), a2 = s8(x2l + vp), b2 = s8(y2 + ut), d;
    if (mode == 0) {
        d = a > z;
        z = z > a ? z : a;
        if (b > z) d = 2;
        z = z > b ? z : b;
        if (a2 > z) d = 3;
        z = z > a2 ? z : a2;
        if (b2 > z) d = 4;
        z = z > b2 ? z : b2;
    } else {
        d = a >= z;
        z = z > a ? z : a;
        if (b >= z) d = 2;
        z = z > b ? z : b;
        if (a2 >= z) d = 3;
        z = z > a2 ? z : a2;
        if (b2 >= z) d = 4;
        z = z > b2 ? z : b2;
    }
    z = z < S.sc_mch ? z : S.sc_mch;
    u = s8(z - vp);
    v = s8(z - ut);
    int tq = s8(z - S.q_v);
    a = s8(a - tq);
    b = s8(b - tq);
    tq = s8(z - S.q2_v);
    a2 = s8(a2 - tq);
    b2 = s8(b2 - tq);
    x = s8((a > 0 ? a : 0) - S.qe_v);
    y = s8((b > 0 ? b : 0) - S.qe_v);
    x2 = s8((a2 > 0 ? a2 : 0) - S.qe2_v);
    y2 = s8((b2 > 0 ? b2 : 0) - S.qe2_v);
    if (mode == 0)
        d |= (a > 0) << 3 | (b > 0) << 4 | (a2 > 0) << 5 | (b2 > 0) << 6;
    else
        d |= (a >= 0) << 3 | (b >= 0) << 4 | (a2 >= 0) << 5 | (b2 >= 0) << 6;
    return d;
}

// One anti-diagonal r: the positions entering the buffers get their initial values, then the first-column
// values, the substitution scores (in the SSE code's 16-cell chunks from st0, stale cells kept) and every
// cell of the widened band [b.st, b.en]. prow != 0: direction bytes to prow[t - b.st]. (last_st, last_en):
// the previous anti-diagonal's widened band (-1, -1 before r = 0). *hiw: the highest position initialised
// so far. Ends synchronised: the buffers hold anti-diagonal r.
__device__ void d2_row(const Ksw2Job& J, const Ksw2Buf& B, const Ksw2Sc& S, int r, const Ksw2Band& b, int last_st,
                       int last_en, int T, int mode, bool with_h, u8* prow, int* hiw) {
    int tend = b.st0 + (b.en0 - b.st0 + 16) / 16 * 16;
    if (tend > T) tend = T;
    const int new_hi = b.en > tend - 1 ? b.en : tend - 1;
    if (new_hi > *hiw) {  // first touch: the values the SSE kernel's arrays start with
        const int from = *hiw + 1;
        G3_LANES {
            for (int t = from + lane; t <= new_hi; t += 32) {
                const int k = slot(B, t);
                arr(B, B_U)[k] = arr(B, B_V)[k] = arr(B, B_X)[k] = arr(B, B_Y)[k] = (i8)S.init1;
                arr(B, B_X2)[k] = arr(B, B_Y2)[k] = (i8)S.init2;
                arr(B, B_S)[k] = 0;
                if (with_h) B.H[k] = KSW2_NEG_INF;
            }
        }
        *hiw = new_hi;
        G3_SYNC();
    }
    int x1, v1, x21;
    if (b.st > 0) {
        if (b.st - 1 >= last_st && b.st - 1 <= last_en) {
            const int k = slot(B, b.st - 1);
            x1 = buf_at(B, B_X, k);
            x21 = buf_at(B, B_X2, k);
            v1 = buf_at(B, B_V, k);
        } else {
            x1 = S.init1;
            x21 = S.init2;
            v1 = S.init1;
        }
    } else {
        x1 = S.init1;
        x21 = S.init2;
        v1 = edge_val(r, S);
    }
    if (b.en >= r) {
        const int k = slot(B, r);
        arr(B, B_Y)[k] = (i8)S.init1;
        arr(B, B_Y2)[k] = (i8)S.init2;
        arr(B, B_U)[k] = (i8)edge_val(r, S);
    }
    G3_LANES {
        for (int t = b.st0 + lane; t < tend; t += 32) {
            const int a = t < J.tlen ? job_base(J.t, J.tlen, J.t_mode, t) : 0;
            const int c = t <= r ? job_base(J.q, J.qlen, J.q_mode, r - t) : 0;
            arr(B, B_S)[slot(B, t)] = (i8)((a == 4 || c == 4) ? S.sc_N : (a == c ? S.sc_mch : S.sc_mis));
        }
    }
    G3_SYNC();
    int cx = x1, cv = v1, cx2 = x21;  // left-neighbour values of the chunk's first cell (uniform)
    for (int base = b.st; base <= b.en; base += 128) {
        // each lane: the 4 cells t0 .. t0 + 3 as one word per array (t0 is a multiple of 4 and so is W, so a
        // lane's 4 slots never wrap)
        G3_LANE(u32, wu);
        G3_LANE(u32, wv);
        G3_LANE(u32, wx);
        G3_LANE(u32, wy);
        G3_LANE(u32, wx2);
        G3_LANE(u32, wy2);
        G3_LANE(u32, ws);
        G3_LANE(int, lx);
        G3_LANE(int, lv);
        G3_LANE(int, lx2);
        G3_LANE(int, hx);
        G3_LANE(int, hv);
        G3_LANE(int, hx2);
        G3_LANES {
            const int t0 = base + 4 * lane;
            if (t0 <= b.en) {
                const int k = slot(B, t0);
                G3_L(wu) = *(const u32*)(arr(B, B_U) + k);
                G3_L(wv) = *(const u32*)(arr(B, B_V) + k);
                G3_L(wx) = *(const u32*)(arr(B, B_X) + k);
                G3_L(wy) = *(const u32*)(arr(B, B_Y) + k);
                G3_L(wx2) = *(const u32*)(arr(B, B_X2) + k);
                G3_L(wy2) = *(const u32*)(arr(B, B_Y2) + k);
                G3_L(ws) = *(const u32*)(arr(B, B_S) + k);
            } else {
                G3_L(wu) = G3_L(wv) = G3_L(wx) = G3_L(wy) = G3_L(wx2) = G3_L(wy2) = G3_L(ws) = 0;
            }
            G3_L(hx) = byte_of(G3_L(wx), 3);  // the old values of the lane's last cell
            G3_L(hv) = byte_of(G3_L(wv), 3);
            G3_L(hx2) = byte_of(G3_L(wx2), 3);
        }
        G3_SHFL_UP1(lx, hx, cx);
        G3_SHFL_UP1(lv, hv, cv);
        G3_SHFL_UP1(lx2, hx2, cx2);
        G3_BCAST(cx, hx, 31);
        G3_BCAST(cv, hv, 31);
        G3_BCAST(cx2, hx2, 31);
        G3_LANES {
            const int t0 = base + 4 * lane;
            if (t0 <= b.en) {
                const int nv = b.en - t0 + 1 < 4 ? (int)(b.en - t0 + 1) : 4;
                int xl = G3_L(lx), vl = G3_L(lv), x2l = G3_L(lx2);
                u32 nu = 0, nvv = 0, nx = 0, ny = 0, nx2 = 0, ny2 = 0, nd = 0;
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int ox = byte_of(G3_L(wx), c), ov = byte_of(G3_L(wv), c), ox2 = byte_of(G3_L(wx2), c);
                    int u = byte_of(G3_L(wu), c), v = ov, x = ox, y = byte_of(G3_L(wy), c), x2 = ox2,
                        y2 = byte_of(G3_L(wy2), c);
                    int d = 0;
                    if (c < nv) d = d2_cell(mode, S, byte_of(G3_L(ws), c), xl, vl, x2l, u, v, x, y, x2, y2);
                    nu |= (u32)(u8)u << (8 * c);
                    nvv |= (u32)(u8)v << (8 * c);
                    nx |= (u32)(u8)x << (8 * c);
                    ny |= (u32)(u8)y << (8 * c);
                    nx2 |= (u32)(u8)x2 << (8 * c);
                    ny2 |= (u32)(u8)y2 << (8 * c);
                    nd |= (u32)(u8)d << (8 * c);
                    xl = ox;
                    vl = ov;
                    x2l = ox2;
                }
                const int k = slot(B, t0);
                *(u32*)(arr(B, B_U) + k) = nu;
                *(u32*)(arr(B, B_V) + k) = nvv;
                *(u32*)(arr(B, B_X) + k) = nx;
                *(u32*)(arr(B, B_Y) + k) = ny;
                *(u32*)(arr(B, B_X2) + k) = nx2;
                *(u32*)(arr(B, B_Y2) + k) = ny2;
                if (prow) *(u32*)(prow + (t0 - b.st)) = nd;
            }
        }
    }
    G3_SYNC();
}

// save (or restore) the 7 byte buffers and hiw: one checkpoint
__device__ __forceinline__ void ckpt_copy(const Ksw2Buf& B, u8* ck, int* hiw, bool save) {
    const int n = 7 * (B.mask + 1) / 4;
    u32* a = (u32*)B.b;
    u32* c = (u32*)ck;
    G3_LANES {
        for (int i = lane; i < n; i += 32) {
            if (save)
                c[i] = a[i];
            else
                a[i] = c[i];
        }
    }
    int* h = (int*)(ck + 7 * (B.mask + 1));
    if (save) {
        G3_SYNC();
        G3_LANES {
            if (lane == 0) *h = *hiw;
        }
    } else {
        *hiw = *h;
    }
    G3_SYNC();
}

// sm_w: the per-warp share of shared memory in slots (a job with W <= sm_w keeps its buffers there: 11*sm_w
// bytes per warp); warp_bytes: each of the n_warps warps' global scratch (warps past n_warps return at once);
// ctr: the next entry of `order` to take.
extern "C" __global__ void __launch_bounds__(128) ksw_extd2_warp(
    const u8* __restrict__ Q, const u8* __restrict__ Tg, const i64* __restrict__ jobs,
    const i64* __restrict__ order, i64 n_job, const int* __restrict__ P, int G, int sm_w,
    u8* __restrict__ scratch, i64 warp_bytes, i64 n_warps, u64* __restrict__ ctr, i64* __restrict__ ez_out,
    u32* __restrict__ cig, const i64* __restrict__ cig_off, i64* __restrict__ n_cig, int* __restrict__ err,
    i64* __restrict__ cells_out) {
    G3_DYN_SMEM(ksw2_smem);
    const i64 wid = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (wid >= n_warps) return;  // the last block's surplus warps: no scratch of their own
    u8* const wscr = scratch + wid * warp_bytes;
    u8* const wsm = ksw2_smem + (i64)(threadIdx.x >> 5) * 11 * sm_w;
    // No loop that holds warp collectives is left by `break` (here and in the forward pass): every exit is
    // the loop's own condition, so the warp leaves it together.
    i64 k;
    G3_FETCH_ADD1(k, ctr);
    while (k < n_job) {
        const i64 jid = order[k];
        const i64* jr = jobs + jid * J_NF;
        Ksw2Job J;
        J.q = Q + jr[J_Q_OFF];
        J.t = Tg + jr[J_T_OFF];
        J.qlen = jr[J_Q_LEN];
        J.tlen = jr[J_T_LEN];
        J.q_mode = (int)jr[J_Q_MODE];
        J.t_mode = (int)jr[J_T_MODE];
        const int flag = (int)jr[J_FLAG];
        const int zdrop = (int)jr[J_ZDROP], end_bonus = (int)jr[J_END_BONUS];
        int w = jr[J_W];
        const int* p = P + jr[J_PSET] * P_NF;
        const int* mat = p + 4;
        int ez[EZ_N];
        ez[EZ_MAX] = 0;
        ez[EZ_ZDROPPED] = 0;
        ez[EZ_MAX_Q] = ez[EZ_MAX_T] = ez[EZ_MQE_T] = ez[EZ_MTE_Q] = -1;
        ez[EZ_MQE] = ez[EZ_MTE] = ez[EZ_SCORE] = KSW2_NEG_INF;
        ez[EZ_REACH_END] = 0;
        int nc = 0;
        i64 n_cells = 0;  // CIGAR words; DP cells computed (widened bands, forward pass + recomputation)
        u32* cg = cig + cig_off[jid];
        const int qlen = J.qlen, tlen = J.tlen;

        int q = s8(p[0]), e = s8(p[1]), q2 = s8(p[2]), e2 = s8(p[3]);
        Ksw2Sc S;
        S.qe = q + e;  // before the swap, as the C code
        bool run = qlen > 0 && tlen > 0;
        if (q2 + e2 < q + e) {
            int t = q; q = q2; q2 = t;
            t = e; e = e2; e2 = t;
        }
        int min_sc = mat[1];
        for (int i = 1; i < 25; ++i) min_sc = mat[i] < min_sc ? mat[i] : min_sc;
        if (-min_sc > 2 * (q + e)) run = false;
        if (run) {
            const bool with_cigar = !(flag & KSW_EZ_SCORE_ONLY), approx_max = (flag & KSW_EZ_APPROX_MAX) != 0;
            const int mode = !with_cigar ? 2 : ((flag & KSW_EZ_RIGHT) ? 1 : 0);
            S.sc_mch = s8(mat[0]);
            S.sc_mis = s8(mat[1]);
            S.sc_N = mat[24] == 0 ? s8(-e2) : s8(mat[24]);
            S.qe_v = s8(q + e);
            S.qe2_v = s8(q2 + e2);
            S.q_v = s8(q);
            S.q2_v = s8(q2);
            S.e = e;
            S.e2 = e2;
            S.init1 = s8(-q - e);
            S.init2 = s8(-q2 - e2);
            if (w < 0) w = tlen > qlen ? tlen : qlen;
            const int T = (tlen + 15) / 16 * 16, nr = qlen + tlen - 1;
            if (e != e2) {
                const int num = q2 - q, den = e - e2;  // C integer division (truncation), as in the kernel
                S.long_thres = num / den - 1;
            } else {
                S.long_thres = 0;
            }
            if ((i64)q2 + e2 + S.long_thres * e2 > (i64)q + e + S.long_thres * e) S.long_thres += 1;
            S.long_diff = S.long_thres * (e - e2) - (q2 - q) - e2;

            const Ksw2Geo g = geometry(qlen, tlen, w, G);
            // warp scratch: checkpoints, the block's direction rows, then (when not in shared memory) the buffers
            u8* ckpt = wscr;
            u8* pblk = ckpt + (with_cigar ? g.n_blk * g.ck : 0);
            u8* gbuf = pblk + (with_cigar ? g.rows * g.pw : 0);
            Ksw2Buf B;
            B.b = g.W <= sm_w ? wsm : gbuf;
            B.H = (int*)(B.b + 7 * g.W);
            B.mask = g.W - 1;
            if ((g.W <= sm_w ? (i64)0 : (i64)11 * g.W) + (gbuf - wscr) > warp_bytes) {
                G3_LANES {
                    if (lane == 0) atomicOr(err, KSW2_ERR_GEOMETRY);
                }
                run = false;
            }
            int hiw = -1;

            // ---------------------------------------------------------------- forward pass
            int H0 = 0, last_H0_t = 0, last_st = -1, last_en = -1;
            bool bad = !run, go = run;
            for (int r = 0; r < nr && go; ++r) {
                const Ksw2Band b = band_of(r, qlen, tlen, w);
                if (b.st0 > b.en0) {
                    ez[EZ_ZDROPPED] = 1;
                    go = false;
                }
                if (go && with_cigar) {
                    if (b.en - b.st + 1 > g.pw) {  // job_geometry's bound (never expected to fail)
                        bad = true;
                        go = false;
                    } else if (r % G == 0) {
                        ckpt_copy(B, ckpt + (r / G) * g.ck, &hiw, true);
                    }
                }
                if (!go) continue;
                d2_row(J, B, S, r, b, last_st, last_en, T, mode, !approx_max, (u8*)0, &hiw);
                n_cells += b.en - b.st + 1;
                if (!approx_max) {
                    int max_H, max_t;
                    if (r > 0) {
                        // H[en0] first, from H[en0 - 1] before its update (the SSE code's order)
                        const int hE = b.en0 > 0 ? B.H[slot(B, b.en0 - 1)] + buf_at(B, B_U, slot(B, b.en0))
                                                 : B.H[slot(B, b.en0)] + buf_at(B, B_V, slot(B, b.en0));
                        G3_SYNC();
                        const int en1 = b.st0 + (b.en0 - b.st0) / 4 * 4;
                        G3_LANE(i64, key);
                        G3_LANES {
                            i64 kk = (i64)(-0x7fffffffffffffffLL - 1);
                            for (int t = b.st0 + lane; t < b.en0; t += 32) {
                                const int sl = slot(B, t);
                                const int h = B.H[sl] + buf_at(B, B_V, sl);
                                B.H[sl] = h;
                                if (t < en1) {
                                    // value, then the lowest of the SSE code's 4 interleaved lanes, then the
                                    // earliest cell: the order in which the SSE reduction keeps ties
                                    const i64 c = (i64)((u64)(i64)h << 32) |
                                                  (i64)((u64)(3 - (lane & 3)) << 28) |
                                                  (i64)(0x0FFFFFFF - (t - b.st0));
                                    kk = c > kk ? c : kk;
                                }
                            }
                            G3_L(key) = kk;
                        }
                        B.H[slot(B, b.en0)] = hE;
                        G3_SYNC();
                        i64 kA;
                        G3_MAX64(kA, key);
                        max_H = hE;
                        max_t = b.en0;
                        if (en1 > b.st0) {
                            const i64 vA = kA >> 32;
                            if (vA > max_H) {
                                max_H = vA;
                                max_t = b.st0 + (0x0FFFFFFF - (kA & 0x0FFFFFFF));
                            }
                        }
                        for (int t = en1; t < b.en0; ++t)
                            if (B.H[slot(B, t)] > max_H) {
                                max_H = B.H[slot(B, t)];
                                max_t = t;
                            }
                    } else {
                        const int h0 = buf_at(B, B_V, slot(B, 0)) - (int)S.qe;
                        B.H[slot(B, 0)] = h0;
                        G3_SYNC();
                        max_H = h0;
                        max_t = 0;
                    }
                    const int h_en0 = B.H[slot(B, b.en0)], h_st0 = B.H[slot(B, b.st0)];
#ifdef KSW2_DIAG_TRACE
                    if (r < 8 && cells_out) {  // diagnosis: the first anti-diagonals' state, 16 words each
                        G3_LANES {
                            if (lane == 0) {
                                i64* tr = cells_out + 1 + r * 16;
                                tr[0] = r; tr[1] = max_H; tr[2] = max_t; tr[3] = hiw; tr[4] = b.st0; tr[5] = b.en0;
                                for (int q = 0; q < 4; ++q) {
                                    tr[6 + q] = B.H[slot(B, q)];
                                    tr[10 + q] = ((i64)(u8)arr(B, B_U)[slot(B, q)] << 8) | (u8)arr(B, B_V)[slot(B, q)];
                                }
                                tr[14] = (i64)((u8*)B.H - B.b);
                                tr[15] = (i64)(B.b == wsm);
                            }
                        }
                    }
#endif
                    if (b.en0 == tlen - 1 && h_en0 > ez[EZ_MTE]) {
                        ez[EZ_MTE] = h_en0;
                        ez[EZ_MTE_Q] = r - b.en;
                    }
                    if (r - b.st0 == qlen - 1 && h_st0 > ez[EZ_MQE]) {
                        ez[EZ_MQE] = h_st0;
                        ez[EZ_MQE_T] = b.st0;
                    }
                    // Z-drop (aligner/ksw2.py _zdrop)
                    bool drop = false;
                    if (max_H > ez[EZ_MAX]) {
                        ez[EZ_MAX] = max_H;
                        ez[EZ_MAX_T] = max_t;
                        ez[EZ_MAX_Q] = r - max_t;
                    } else if (max_t >= ez[EZ_MAX_T] && r - max_t >= ez[EZ_MAX_Q]) {
                        const int tl = max_t - ez[EZ_MAX_T], ql = (r - max_t) - ez[EZ_MAX_Q];
                        const int gap = tl > ql ? tl - ql : ql - tl;
                        if (zdrop >= 0 && ez[EZ_MAX] - max_H > zdrop + gap * e2) {
                            ez[EZ_ZDROPPED] = 1;
                            drop = true;
                        }
                    }
                    G3_SYNC();  // the uniform reads of H are done before the next anti-diagonal (or traceback) writes
                    if (drop)
                        go = false;
                    else if (r == qlen + tlen - 2 && b.en0 == tlen - 1)
                        ez[EZ_SCORE] = h_en0;
                } else {
                    if (r > 0) {
                        if (last_H0_t >= b.st0 && last_H0_t <= b.en0 && last_H0_t + 1 >= b.st0 &&
                            last_H0_t + 1 <= b.en0) {
                            const int d0 = buf_at(B, B_V, slot(B, last_H0_t));
                            const int d1 = buf_at(B, B_U, slot(B, last_H0_t + 1));
                            if (d0 > d1) {
                                H0 += d0;
                            } else {
                                H0 += d1;
                                ++last_H0_t;
                            }
                        } else if (last_H0_t >= b.st0 && last_H0_t <= b.en0) {
                            H0 += buf_at(B, B_V, slot(B, last_H0_t));
                        } else {
                            ++last_H0_t;
                            H0 += buf_at(B, B_U, slot(B, last_H0_t));
                        }
                    } else {
                        H0 = buf_at(B, B_V, slot(B, 0)) - S.qe;
                        last_H0_t = 0;
                    }
                    bool drop = false;
                    if (flag & KSW_EZ_APPROX_DROP) {
                        if (H0 > ez[EZ_MAX]) {
                            ez[EZ_MAX] = H0;
                            ez[EZ_MAX_T] = last_H0_t;
                            ez[EZ_MAX_Q] = r - last_H0_t;
                        } else if (last_H0_t >= ez[EZ_MAX_T] && r - last_H0_t >= ez[EZ_MAX_Q]) {
                            const int tl = last_H0_t - ez[EZ_MAX_T], ql = (r - last_H0_t) - ez[EZ_MAX_Q];
                            const int gap = tl > ql ? tl - ql : ql - tl;
                            if (zdrop >= 0 && ez[EZ_MAX] - H0 > zdrop + gap * e2) {
                                ez[EZ_ZDROPPED] = 1;
                                drop = true;
                            }
                        }
                    }
                    G3_SYNC();
                    if (drop)
                        go = false;
                    else if (r == qlen + tlen - 2 && b.en0 == tlen - 1)
                        ez[EZ_SCORE] = H0;
                }
                last_st = b.st;
                last_en = b.en;
            }
            if (bad) {
                if (run) {
                    G3_LANES {
                        if (lane == 0) atomicOr(err, KSW2_ERR_GEOMETRY);
                    }
                }
            } else if (with_cigar) {
                // ------------------------------------------------------------ the traceback's start
                const bool rev_cigar = (flag & KSW_EZ_REV_CIGAR) != 0;
                int i0 = -1, j0 = -1;
                bool walk = true;
                if (!ez[EZ_ZDROPPED] && !(flag & KSW_EZ_EXTZ_ONLY)) {
                    i0 = tlen - 1;
                    j0 = qlen - 1;
                } else if (!ez[EZ_ZDROPPED] && (flag & KSW_EZ_EXTZ_ONLY) && ez[EZ_MQE] + end_bonus > ez[EZ_MAX]) {
                    ez[EZ_REACH_END] = 1;
                    i0 = ez[EZ_MQE_T];
                    j0 = qlen - 1;
                } else if (ez[EZ_MAX_T] >= 0 && ez[EZ_MAX_Q] >= 0) {
                    i0 = ez[EZ_MAX_T];
                    j0 = ez[EZ_MAX_Q];
                } else {
                    walk = false;  // no CIGAR
                }
                if (walk) {
                    // -------------------------------------------------------- gridded traceback
                    int i = i0, j = j0, cur_blk = -1;
                    int state = 0;
                    u32 pend = 0;  // the CIGAR op being extended (merged runs), written when it changes
                    while (i >= 0 && j >= 0) {
                        const int r = i + j;
                        const int blk = r / G;
                        if (blk != cur_blk) {  // recompute the block's anti-diagonals up to r with directions
                            const int r0 = blk * G;
                            ckpt_copy(B, ckpt + blk * g.ck, &hiw, false);
                            for (int rr = r0; rr <= r; ++rr) {
                                const Ksw2Band bb = band_of(rr, qlen, tlen, w);
                                int ls = -1, le = -1;
                                if (rr > 0) {
                                    const Ksw2Band bp = band_of(rr - 1, qlen, tlen, w);
                                    ls = bp.st;
                                    le = bp.en;
                                }
                                d2_row(J, B, S, rr, bb, ls, le, T, mode, false, pblk + (rr - r0) * g.pw, &hiw);
                                n_cells += bb.en - bb.st + 1;
                            }
                            cur_blk = blk;
                        }
                        const Ksw2Band br = band_of(r, qlen, tlen, w);
                        int force = -1, tmp = 0;
                        if (i < br.st) force = 2;
                        if (i > br.en) force = 1;
                        if (force < 0) tmp = pblk[(r - blk * G) * g.pw + (i - br.st)];
                        if (state == 0)
                            state = tmp & 7;
                        else if (!((tmp >> (state + 2)) & 1))
                            state = 0;
                        if (state == 0) state = tmp & 7;
                        if (force >= 0) state = force;
                        int op;
                        if (state == 0) {
                            op = 0;
                            --i;
                            --j;
                        } else if (state == 1 || state == 3) {
                            op = 2;
                            --i;
                        } else {
                            op = 1;
                            --j;
                        }
                        if (pend != 0 && (int)(pend & 0xF) == op) {
                            pend += 16;
                        } else {
                            if (pend != 0) {
                                G3_LANES {
                                    if (lane == 0) cg[nc] = pend;
                                }
                                ++nc;
                            }
                            pend = 16u | (u32)op;
                        }
#ifndef KSW2_DIAG_NO_WALK_SYNC
                        G3_SYNC();  // every lane has read this step's direction byte
#endif
                    }
                    G3_SYNC();
                    if (i >= 0) {
                        if (pend != 0 && (pend & 0xF) == 2) {
                            pend += (u32)((i + 1) << 4);
                        } else {
                            if (pend != 0) {
                                G3_LANES {
                                    if (lane == 0) cg[nc] = pend;
                                }
                                ++nc;
                            }
                            pend = (u32)((i + 1) << 4 | 2);
                        }
                    }
                    if (j >= 0) {
                        if (pend != 0 && (pend & 0xF) == 1) {
                            pend += (u32)((j + 1) << 4);
                        } else {
                            if (pend != 0) {
                                G3_LANES {
                                    if (lane == 0) cg[nc] = pend;
                                }
                                ++nc;
                            }
                            pend = (u32)((j + 1) << 4 | 1);
                        }
                    }
                    if (pend != 0) {
                        G3_LANES {
                            if (lane == 0) cg[nc] = pend;
                        }
                        ++nc;
                    }
                    G3_SYNC();
                    if (!rev_cigar) {  // the walk made the CIGAR from its end
                        G3_LANES {
                            for (int a = lane; a < nc / 2; a += 32) {
                                const u32 t = cg[a];
                                cg[a] = cg[nc - 1 - a];
                                cg[nc - 1 - a] = t;
                            }
                        }
                        G3_SYNC();
                    }
                }
            }
        }
        G3_LANES {
            if (lane == 0) {
                for (int f = 0; f < EZ_N; ++f) ez_out[jid * EZ_N + f] = ez[f];
                n_cig[jid] = nc;
                if (cells_out) cells_out[jid] = n_cells;
            }
        }
        G3_SYNC();
        G3_FETCH_ADD1(k, ctr);
    }
}
