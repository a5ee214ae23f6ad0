// DP chaining of `g3align map` on the GPU: the score pass of minimap2's mg_lchain_dp, one thread
// per read over its anchors, one source anchor at a time (the baseline for the tiled score generation the
// issue asks for). Exactly aligner/map/lchain.py's dp_scores (the numba twin); backtracking and the chained
// anchor list stay in the twin (lchain.dp_chains).
//
// Read r's anchors are [off[r], off[r+1]) of ax/ay (minimap2's layout: x = rev<<63 | rid<<32 | rpos,
// y = seg<<48 | flags<<40 | qspan<<32 | qpos), sorted like minimap2 sorts them. mdx/mdy: the read's
// max_dist_x/max_dist_y after lchain.dp_limits; nseg: its segment count. Output per anchor: f (best chain
// score ending there) and p (predecessor, -1 for none); t is per-anchor scratch.
//
// Floating point: minimap2's penalties are single precision; products and sums are rounded one by one
// (__fmul_rn/__fadd_rn: no fused multiply-add), as the twin and minimap2 compute them.
typedef long long i64;
typedef unsigned long long u64;

#define LC_INT32_MIN (-2147483647LL - 1)

__device__ __forceinline__ i64 lo32s(u64 v) { return (i64)(int)(unsigned)(v & 0xffffffffULL); }
__device__ __forceinline__ i64 qspan_of(u64 y) { return (i64)((y >> 32) & 0xff); }
__device__ __forceinline__ i64 seg_of(u64 y) { return (i64)((y >> 48) & 0xff); }

// minimap2's mg_log2 (bit-trick approximation, meaningful for x >= 2)
__device__ __forceinline__ float mg_log2(float x) {
    union {
        float f;
        unsigned i;
    } z;
    z.f = x;
    float log_2 = (float)((i64)((z.i >> 23) & 255u) - 128);
    z.i &= ~(255u << 23);
    z.i += 127u << 23;
    float zf = z.f;
    return __fadd_rn(log_2, __fsub_rn(__fmul_rn(__fadd_rn(__fmul_rn(-0.34484843f, zf), 2.02466578f), zf),
                                      0.67487759f));
}

// comput_sc: gap score of chaining anchor j before anchor i, LC_INT32_MIN when they cannot chain
__device__ __forceinline__ i64 comput_sc(u64 xi, u64 yi, u64 xj, u64 yj, i64 mdx, i64 mdy, int bw, float pg,
                                         float ps, int is_cdna, i64 n_seg) {
    i64 dq = lo32s(yi) - lo32s(yj);
    i64 sidi = seg_of(yi), sidj = seg_of(yj);
    if (dq <= 0 || dq > mdx) return LC_INT32_MIN;
    i64 dr = lo32s(xi - xj);
    if (sidi == sidj && (dr == 0 || dq > mdy)) return LC_INT32_MIN;
    i64 dd = dr > dq ? dr - dq : dq - dr;
    if (sidi == sidj && dd > bw) return LC_INT32_MIN;
    if (n_seg > 1 && !is_cdna && sidi == sidj && dr > mdy) return LC_INT32_MIN;
    i64 dg = dr < dq ? dr : dq;
    i64 q_span = qspan_of(yj);
    i64 sc = q_span < dg ? q_span : dg;
    if (dd || dg > q_span) {
        float lin_pen = __fadd_rn(__fmul_rn(pg, (float)dd), __fmul_rn(ps, (float)dg));
        float log_pen = dd >= 1 ? mg_log2((float)(dd + 1)) : 0.0f;
        if (is_cdna || sidi != sidj) {
            if (sidi != sidj && dr == 0) sc += 1;
            else if (dr > dq || sidi != sidj) sc -= (i64)(lin_pen < log_pen ? lin_pen : log_pen);
            else sc -= (i64)__fadd_rn(lin_pen, __fmul_rn(0.5f, log_pen));
        } else {
            sc -= (i64)__fadd_rn(lin_pen, __fmul_rn(0.5f, log_pen));
        }
    }
    return sc;
}

extern "C" __global__ void lchain_dp_kernel(const u64* __restrict__ ax, const u64* __restrict__ ay,
                                            const i64* __restrict__ off, i64 n_reads, const i64* __restrict__ mdx_r,
                                            const i64* __restrict__ mdy_r, const i64* __restrict__ nseg_r, int bw,
                                            int max_skip, int max_iter, float pg, float ps, int is_cdna,
                                            i64* __restrict__ f, i64* __restrict__ p, i64* __restrict__ t) {
    i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_reads) return;
    const i64 b = off[r], n = off[r + 1] - b;
    const u64* x = ax + b;
    const u64* y = ay + b;
    i64* F = f + b;
    i64* P = p + b;
    i64* T = t + b;
    const i64 mdx = mdx_r[r], mdy = mdy_r[r], n_seg = nseg_r[r];
    const u64 umdx = (u64)mdx;
    for (i64 i = 0; i < n; ++i) T[i] = 0;
    i64 st = 0, max_ii = -1;
    for (i64 i = 0; i < n; ++i) {
        i64 max_j = -1, max_f = qspan_of(y[i]), n_skip = 0;
        const u64 xi = x[i], yi = y[i];
        while (st < i && ((xi >> 32) != (x[st] >> 32) || xi > x[st] + umdx)) ++st;
        if (i - st > max_iter) st = i - max_iter;
        i64 j = i - 1;
        for (; j >= st; --j) {
            i64 sc = comput_sc(xi, yi, x[j], y[j], mdx, mdy, bw, pg, ps, is_cdna, n_seg);
            if (sc != LC_INT32_MIN) {
                sc += F[j];
                if (sc > max_f) {
                    max_f = sc;
                    max_j = j;
                    if (n_skip > 0) --n_skip;
                } else if (T[j] == i) {
                    if (++n_skip > max_skip) break;
                }
                if (P[j] >= 0) T[P[j]] = i;
            }
        }
        const i64 end_j = j;
        if (max_ii < 0 || xi - x[max_ii] > umdx) {
            i64 mx = LC_INT32_MIN;
            max_ii = -1;
            for (i64 jj = i - 1; jj >= st; --jj)
                if (mx < F[jj]) {
                    mx = F[jj];
                    max_ii = jj;
                }
        }
        if (max_ii >= 0 && max_ii < end_j) {
            i64 tmp = comput_sc(xi, yi, x[max_ii], y[max_ii], mdx, mdy, bw, pg, ps, is_cdna, n_seg);
            if (tmp != LC_INT32_MIN && max_f < tmp + F[max_ii]) {
                max_f = tmp + F[max_ii];
                max_j = max_ii;
            }
        }
        F[i] = max_f;
        P[i] = max_j;
        if (max_ii < 0 || (xi - x[max_ii] <= umdx && F[max_ii] < F[i])) max_ii = i;
    }
}

// The same score pass with a WARP per read (intra-query parallelism): for target anchor i, the 32 lanes
// take 32 candidate predecessors j = jb, jb-1, ..., jb-31 at once (coalesced loads of x, y, f, p, t),
// each computing its gap score; the order-dependent part of minimap2's loop (best score so far, n_skip,
// the early break) is then replayed over only the lanes that can change it, in j order, with shuffles.
// Why this is exact:
//  - t[j] == i in the sequential loop means "some j' > j already visited for this i chained (score !=
//    INT32_MIN) and has p[j'] == j". Since p[j'] < j' always, every valid lane writes t[p[j]] = i first, and
//    after a __syncwarp each lane's t[j] == i holds exactly for the j' > j of this chunk and of the
//    earlier chunks. Lanes past the break also write, but only to t[x] with x below the break, which this i
//    never reads again (and later targets i' look for t == i', never i).
//  - A lane changes the state only if its score beats the best so far or its t mark is set. The best only
//    grows, so lanes whose score does not beat the best at the chunk start (and have no mark) are skipped.
//  - The fallback argmax over f[st..i-1] takes, among equal maxima, the largest index, as the descending
//    scan with a strict < does.
// The per-read state (st, max_ii, the best) is uniform across the warp. Launch: blockDim.x a multiple of
// 32, one warp per entry of `order` (reads, e.g. longest first, so the longest start first).
extern "C" __global__ void lchain_dp_warp_kernel(const u64* __restrict__ ax, const u64* __restrict__ ay,
                                                 const i64* __restrict__ off, const i64* __restrict__ order,
                                                 i64 n_reads, const i64* __restrict__ mdx_r,
                                                 const i64* __restrict__ mdy_r, const i64* __restrict__ nseg_r,
                                                 int bw, int max_skip, int max_iter, float pg, float ps,
                                                 int is_cdna, i64* __restrict__ f, i64* __restrict__ p,
                                                 i64* __restrict__ t) {
    const i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= n_reads) return;  // uniform per warp
    const i64 r = order[w];
    const i64 b = off[r], n = off[r + 1] - b;
    const u64* x = ax + b;
    const u64* y = ay + b;
    i64* F = f + b;
    i64* P = p + b;
    i64* T = t + b;
    const i64 mdx = mdx_r[r], mdy = mdy_r[r], n_seg = nseg_r[r];
    const u64 umdx = (u64)mdx;
    const unsigned FULL = 0xffffffffu;
    for (i64 k = lane; k < n; k += 32) T[k] = 0;
    __syncwarp();
    i64 st = 0, max_ii = -1;
    for (i64 i = 0; i < n; ++i) {
        const u64 xi = x[i], yi = y[i];
        while (st < i && ((xi >> 32) != (x[st] >> 32) || xi > x[st] + umdx)) ++st;
        if (i - st > max_iter) st = i - max_iter;
        i64 max_f = qspan_of(yi), max_j = -1, end_j = st - 1;
        int n_skip = 0;
        bool brk = false;
        for (i64 jb = i - 1; jb >= st && !brk; jb -= 32) {
            const i64 j = jb - lane;
            const bool in = j >= st;
            i64 s = 0;
            bool valid = false;
            if (in) {
                const i64 sc = comput_sc(xi, yi, x[j], y[j], mdx, mdy, bw, pg, ps, is_cdna, n_seg);
                if (sc != LC_INT32_MIN) {
                    valid = true;
                    s = sc + F[j];
                    const i64 pj = P[j];
                    if (pj >= 0) T[pj] = i;
                }
            }
            __syncwarp();
            const bool mark = in && T[j] == i;
            unsigned m = __ballot_sync(FULL, valid && (s > max_f || mark));
            const unsigned mk = __ballot_sync(FULL, mark);
            while (m) {  // uniform: the lanes that can change the state, in descending j
                const int k = __ffs(m) - 1;
                m &= m - 1;
                const i64 sk = __shfl_sync(FULL, s, k);
                if (sk > max_f) {
                    max_f = sk;
                    max_j = jb - k;
                    if (n_skip > 0) --n_skip;
                } else if ((mk >> k) & 1u) {
                    if (++n_skip > max_skip) {
                        brk = true;
                        end_j = jb - k;
                        break;
                    }
                }
            }
            __syncwarp();  // this chunk's reads of T are done before the next chunk's writes
        }
        if (max_ii < 0 || xi - x[max_ii] > umdx) {
            i64 mx = LC_INT32_MIN, mi = -1;
            for (i64 jj = i - 1 - lane; jj >= st; jj -= 32)
                if (mx < F[jj]) {
                    mx = F[jj];
                    mi = jj;
                }
            for (int o = 16; o > 0; o >>= 1) {
                const i64 mx2 = __shfl_xor_sync(FULL, mx, o), mi2 = __shfl_xor_sync(FULL, mi, o);
                if (mx2 > mx || (mx2 == mx && mi2 > mi)) {
                    mx = mx2;
                    mi = mi2;
                }
            }
            max_ii = mi;
        }
        if (max_ii >= 0 && max_ii < end_j) {
            const i64 tmp = comput_sc(xi, yi, x[max_ii], y[max_ii], mdx, mdy, bw, pg, ps, is_cdna, n_seg);
            if (tmp != LC_INT32_MIN && max_f < tmp + F[max_ii]) {
                max_f = tmp + F[max_ii];
                max_j = max_ii;
            }
        }
        if (lane == 0) {
            F[i] = max_f;
            P[i] = max_j;
        }
        __syncwarp();
        if (max_ii < 0 || (xi - x[max_ii] <= umdx && F[max_ii] < max_f)) max_ii = i;
    }
}
