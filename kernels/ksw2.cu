// minimap2 2.24's ksw_extd2_sse (extension / global alignment with two affine gap models and Z-drop) for
// a batch of jobs: ONE WARP PER JOB, bit-exact with aligner/map/ksw2.py's extd2 (its CPU twin and the oracle
// of the tests; that module explains the SSE kernel's layout).
//
// Thread mapping. The DP is filled one anti-diagonal r = t + j at a time (t target, j query), as the SSE
// kernel does. The cells of an anti-diagonal depend only on the previous one, so the 32 lanes take its
// widened band [st, en] in chunks of 32 consecutive target positions (coalesced byte loads and stores of the
// difference arrays u v x y x2 y2 and the score row s). A cell also needs its left neighbour's values from
// before the update (x, v, x2 at t-1): lanes get them with a shuffle, lane 0 from the previous chunk's lane
// 31, or from x1/v1/x21 on the first chunk. The arrays are updated in place with the SSE kernel's life
// cycle (stale values of the widened blocks included), so every ez field and the CIGAR equal the SSE
// kernel's. Per anti-diagonal the exact maximum is one warp max-reduction of a packed key that encodes the
// SSE code's tie order; the approximate (greedy path) maximum and the Z-drop test are uniform scalar code.
//
// Gridded traceback. The forward pass keeps no direction matrix. Before every G-th anti-diagonal it saves
// the 7 byte arrays over the columns the next G anti-diagonals can read ([st - 1, en of the block's last
// anti-diagonal]). The traceback walks the path back block by block: it restores the block's checkpoint,
// recomputes the block's anti-diagonals with their direction bits into a G x row-width buffer -- only the
// cone of cells the path can still reach from where it enters the block, ~G*G/2 cells (see d2_row) -- and
// follows the path through it. The recomputed bits equal the forward pass's (same inputs, same arithmetic), so the
// CIGAR is minimap2's; the DP memory per job is 7*T + (nr/G)*7*(band+G) + G*band bytes instead of nr*band.
//
// Cells per lane. By default (KSW2_SIMD4) each lane takes four consecutive cells of an anti-diagonal as one
// 32-bit word and updates them with byte-wise SIMD instructions, as the SSE kernel does with 16 (d2_cells4);
// the substitution scores are made four at a time too, from copies of the job's bases in its scratch
// (Ksw2Arr::tg / qr). Benchmark variants (compile-time, scripts/ksw2_jobs.py bench --variants): KSW2_SCALAR
// (one cell per lane, the kernel before SIMD4 became the default: 1.6x slower on chr20 map-pb jobs),
// KSW2_MIN_BLOCKS (launch bounds), KSW2_PROFILE (cycles per phase), KSW2_FUSED_S (the substitution scores
// made in the cell loop, d2_cells4, instead of a pass of their own) and KSW2_IX64 (64-bit positions, see ix).
// All give the same results (the host builds of the tests run the default, KSW2_SCALAR, KSW2_FUSED_S and
// KSW2_IX64).
//
// Scratch per job (global memory at geo[j*3], 16-aligned; sizes from aligner/map/gpu/ksw2.py job_geometry):
// u v x y x2 y2 s (T bytes each, T = tlen rounded up to 16), the target's bases (T) and the query's backwards
// with padding ((qlen + 47) / 16 * 16 bytes), H (int32 x T, exact-maximum mode only), the
// checkpoints (one per G anti-diagonals, 7 x ckw bytes each) and the block's direction rows (G x pw bytes;
// both only when a CIGAR is asked for). Code shape: kernels/warp.cuh (one source for the GPU and for the
// host build of the tests, which runs a warp's 32 lanes in lock step).
#include "warp.cuh"

#ifndef KSW2_SCALAR
#define KSW2_SIMD4 1
#endif

typedef long long i64;
// ix: positions, lengths and scores of one job, 32-bit as minimap2's int32_t (124 registers; 64-bit, the
// KSW2_IX64 variant, takes 144: three 128-thread blocks per SM instead of four, and the 32-bit build ran 14 %
// faster on chr20 map-pb jobs, docs/BENCHMARKS.md's git history).
// Without KSW2_OPAQUE below, CUDA 13.0's ptxas for sm_90 miscompiled the 32-bit build's loop trip counts: a bound
// such as b.en0 = min(tlen - 1, r, (r + w) >> 1) reached it in PTX as max(~r, -tlen, ~((r + w) >> 1)), which ptxas
// fused into one three-input VIMNMX3 that dropped the negation of tlen, and the 4x-unrolled exact-maximum loop
// read H far past the job's scratch (compute-sanitizer, scripts/ksw2_memcheck.py; the PTX was right, the SASS
// was not; -G builds were clean). 64-bit min/max have no three-input form. With KSW2_OPAQUE the PTX has no such
// chain (scripts/ptx_negminmax.py, a test keeps it so), and memcheck and the GPU tests pass.
#ifdef KSW2_IX64
typedef long long ix;
#else
typedef int ix;
#endif
// KSW2_OPAQUE(v): in the 32-bit (default) build on the GPU, v's value hidden from the optimiser (an empty asm that
// "changes" it), so that loop bounds made of min/max (band_of, the cone's columns) reach PTX as plain registers
// and not as max(~a, -b, ~c) chains, the shape ptxas 13.0 miscompiles (scripts/ptx_negminmax.py finds none with
// it). Elsewhere: nothing.
#if !defined(KSW2_IX64) && defined(G3_REAL_WARP) && !defined(KSW2_NO_OPAQUE)  // (NO_OPAQUE: the tests' negative case)
#define KSW2_OPAQUE(v) asm("" : "+r"(v))
#else
#define KSW2_OPAQUE(v) ((void)0)
#endif
typedef unsigned long long u64;
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned int u32;

#define KSW2_NEG_INF (-0x40000000)
// ez fields (aligner/map/types.py)
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
// job rows (aligner/map/gpu/ksw2.py J_*): the query is Q[q_off, q_off + q_len) read backwards when
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

// KSW2_PROFILE (benchmarks only, scripts/ksw2_jobs.py --variants KSW2_PROFILE=1): clock64() cycles of each
// phase of a job summed over all warps into ksw2_prof[] (KP_* indices); off, the macros are empty.
#define KP_INIT 0
#define KP_CKPT 1
#define KP_FWD_S 2
#define KP_FWD_CELLS 3
#define KP_FWD_MAX 4
#define KP_TB_RESTORE 5
#define KP_TB_S 6
#define KP_TB_CELLS 7
#define KP_TB_WALK 8
#define KP_N 9
#if defined(G3_REAL_WARP) && defined(KSW2_PROFILE)
__device__ unsigned long long ksw2_prof[KP_N];
struct Ksw2Prof {
    long long t, c[KP_N];
};
#define KP_DECL                                   \
    Ksw2Prof kp_;                                 \
    for (int i_ = 0; i_ < KP_N; ++i_) kp_.c[i_] = 0; \
    kp_.t = clock64()
#define KP(k)                                     \
    do {                                          \
        const long long n_ = clock64();           \
        kp_.c[(k)] += n_ - kp_.t;                 \
        kp_.t = n_;                               \
    } while (0)
#define KP_PARAM , Ksw2Prof &kp_, int kb_
#define KP_ARG(kb) , kp_, (kb)
#define KP_FLUSH                                                                          \
    do {                                                                                  \
        if ((threadIdx.x & 31u) == 0)                                                     \
            for (int i_ = 0; i_ < KP_N; ++i_) atomicAdd(&ksw2_prof[i_], (unsigned long long)kp_.c[i_]); \
    } while (0)
#else
#define KP_DECL
#define KP(k)
#define KP_PARAM
#define KP_ARG(kb)
#define KP_FLUSH
#endif

__device__ __forceinline__ int s8(int x) { return (int)(i8)x; }

struct Ksw2Job {
    const u8 *q, *t;
    ix qlen, tlen;
    int q_mode, t_mode;
};

// the query's k-th base as the job sees it (reversed / complemented views of the source bytes)
__device__ __forceinline__ int job_base(const u8* src, ix len, int mode, ix k) {
    int c = src[(mode & 1) ? len - 1 - k : k];
    if (mode & 2) c = c < 4 ? 3 - c : 4;
    return c;
}

struct Ksw2Band {
    ix st0, en0, st, en;  // the band of one anti-diagonal, then widened to whole 16-byte blocks
};

__device__ __forceinline__ Ksw2Band band_of(ix r, ix qlen, ix tlen, ix w) {
    Ksw2Band b;
    b.st0 = 0;
    b.en0 = tlen - 1;
    if (b.st0 < r - qlen + 1) b.st0 = r - qlen + 1;
    if (b.en0 > r) b.en0 = r;
    if (b.st0 < (r - w + 1) >> 1) b.st0 = (r - w + 1) >> 1;
    if (b.en0 > (r + w) >> 1) b.en0 = (r + w) >> 1;
    KSW2_OPAQUE(b.st0);
    KSW2_OPAQUE(b.en0);
    b.st = b.st0 / 16 * 16;
    b.en = (b.en0 + 16) / 16 * 16 - 1;
    return b;
}

// scores and gap constants after ksw_extd2_sse's swap of the two gap models
struct Ksw2Sc {
    int q_v, q2_v, qe_v, qe2_v, sc_mch, sc_mis, sc_N, init1, init2, e, e2;
    ix long_thres, long_diff, qe;  // qe: q + e taken before the swap (the r == 0 score)
};

struct Ksw2Arr {
    i8 *u, *v, *x, *y, *x2, *y2, *s;
    // the job's bases as the DP reads them (job_base), copied once per job: tg[t] the target (0 from tlen to
    // T), qr[KSW2_QPAD + k] the query backwards (query base qlen - 1 - k), zero around it, so that the query
    // bases of target columns t .. t + 3 on anti-diagonal r are the consecutive bytes from
    // KSW2_QPAD + qlen - 1 - r + t (a position past either end reads as base 0, as the SSE kernel's padded
    // rows do)
    u8 *tg, *qr;
};
#define KSW2_QPAD 4

// u[r] / v1 on the band's first column: the score of an all-gap prefix of length r, as differences
__device__ __forceinline__ int edge_val(ix r, const Ksw2Sc& S) {
    if (r == 0) return S.init1;
    if (r < S.long_thres) return s8(-S.e);
    if (r == S.long_thres) return s8((int)S.long_diff);
    return s8(-S.e2);
}

// One DP cell (aligner/map/ksw2.py _d2_cells): old u, y, y2 at t and the left neighbour's old x, v, x2 in;
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

// The substitution score of cell (r, t) of the one-cell-per-lane build (KSW2_SCALAR): target base t against
// query base r - t, from the job's copies of its bases (Ksw2Arr::tg / qr).
__device__ __forceinline__ int sub_score(const Ksw2Arr& A, const Ksw2Sc& S, ix qlen, ix r, ix t) {
    const int a = A.tg[t], c = A.qr[KSW2_QPAD + qlen - 1 - r + t];
    return (a == 4 || c == 4) ? S.sc_N : (a == c ? S.sc_mch : S.sc_mis);
}

// A chunk's left neighbours: (l1, l2, l3) of each lane = the old (ox, ov, ox2) of the lane below, lane 0's from
// the carried (cx, cv, cx2); the carry becomes lane 31's old values for the next chunk.
#define KSW2_FROM_LEFT(l1, l2, l3) \
    do {                             \
        G3_SHFL_UP1(l1, ox, cx);     \
        G3_SHFL_UP1(l2, ov, cv);     \
        G3_SHFL_UP1(l3, ox2, cx2);   \
        G3_BCAST(cx, ox, 31);        \
        G3_BCAST(cv, ov, 31);        \
        G3_BCAST(cx2, ox2, 31);      \
    } while (0)

#ifdef KSW2_SIMD4
// d2_cell on four cells at once (KSW2_SIMD4, the default): byte k of each word is the cell of column
// t0 + k, and every operation is the byte-wise one of the SSE kernel (wrapping adds and subtractions, signed
// max / min / compare), so the values and direction bytes are d2_cell's.
__device__ __forceinline__ u32 rep4(int c) { return (u32)(u8)c * 0x01010101u; }

// 0xFF in each byte where p > q (strict) or p >= q, as signed bytes
__device__ __forceinline__ u32 cmp4(bool strict, u32 p, u32 q) { return strict ? __vcmpgts4(p, q) : __vcmpges4(p, q); }

__device__ __forceinline__ u32 d2_cell4(int mode, const Ksw2Sc& S, u32 z, u32 xl, u32 vl, u32 x2l, u32& u, u32& v,
                                        u32& x, u32& y, u32& x2, u32& y2) {
    const u32 vp = vl, ut = u;
    u32 a = __vadd4(xl, vp), b = __vadd4(y, ut), a2 = __vadd4(x2l, vp), b2 = __vadd4(y2, ut), d, m;
    const bool strict = mode == 0;  // mode 0: a state wins only when strictly better (d2_cell)
    m = cmp4(strict, a, z);
    d = m & 0x01010101u;
    z = __vmaxs4(z, a);
    m = cmp4(strict, b, z);
    d = (d & ~m) | (m & 0x02020202u);
    z = __vmaxs4(z, b);
    m = cmp4(strict, a2, z);
    d = (d & ~m) | (m & 0x03030303u);
    z = __vmaxs4(z, a2);
    m = cmp4(strict, b2, z);
    d = (d & ~m) | (m & 0x04040404u);
    z = __vmaxs4(z, b2);
    z = __vmins4(z, rep4(S.sc_mch));
    u = __vsub4(z, vp);
    v = __vsub4(z, ut);
    u32 tq = __vsub4(z, rep4(S.q_v));
    a = __vsub4(a, tq);
    b = __vsub4(b, tq);
    tq = __vsub4(z, rep4(S.q2_v));
    a2 = __vsub4(a2, tq);
    b2 = __vsub4(b2, tq);
    x = __vsub4(__vmaxs4(a, 0u), rep4(S.qe_v));
    y = __vsub4(__vmaxs4(b, 0u), rep4(S.qe_v));
    x2 = __vsub4(__vmaxs4(a2, 0u), rep4(S.qe2_v));
    y2 = __vsub4(__vmaxs4(b2, 0u), rep4(S.qe2_v));
    d |= (cmp4(strict, a, 0u) & 0x08080808u) | (cmp4(strict, b, 0u) & 0x10101010u) |
         (cmp4(strict, a2, 0u) & 0x20202020u) | (cmp4(strict, b2, 0u) & 0x40404040u);
    return d;
}

// The bytes of the word of columns t0 .. t0 + 3 whose column lies outside [lo, hi) (0xFF each, else 0): the
// low bytes below lo and the high bytes from hi on, as masks made by shifts.
__device__ __forceinline__ u32 outside4(ix t0, ix lo, ix hi) {
    ix a = lo - t0, b = hi - t0;  // bytes [0, a) lie below lo, bytes [b, 4) at or above hi
    a = a < 0 ? 0 : (a > 4 ? 4 : a);
    b = b < 0 ? 0 : (b > 4 ? 4 : b);
    return (u32)((1ull << (8 * a)) - 1) | ~(u32)((1ull << (8 * b)) - 1);
}

// The substitution scores of columns t0 .. t0 + 3 (t0 a multiple of 4) of the anti-diagonal whose query
// offset is qoff = KSW2_QPAD + qlen - 1 - r: the target word tg[t0..] against the query bytes qr[qoff + t0..]
// (two aligned words and a byte permutation; qoff + t0 >= 1 for every word the score row covers).
__device__ __forceinline__ u32 score4(const Ksw2Arr& A, const Ksw2Sc& S, ix qoff, ix t0) {
    const u32* const Qw = (const u32*)A.qr;
    const u32 a = ((const u32*)A.tg)[t0 >> 2];
    const ix qi = qoff + t0;
    const u32 c = __byte_perm(Qw[qi >> 2], Qw[(qi >> 2) + 1], 0x3210u + 0x1111u * (u32)(qi & 3));
    const u32 four = 0x04040404u, eq = __vcmpeq4(a, c), nn = __vcmpeq4(a, four) | __vcmpeq4(c, four);
    return (nn & rep4(S.sc_N)) | (~nn & ((eq & rep4(S.sc_mch)) | (~eq & rep4(S.sc_mis))));
}

// d2_row's cell loop with 4 columns per lane (128 per step over the warp): the cells of [c0, c1], whose
// first cell's left neighbour is (x1, v1, x21). Words start at a multiple of 4 columns; the bytes of a word
// outside [c0, c1] keep their old values (they are still read as left neighbours).
// KSW2_FUSED_S (a benchmark variant): the lane also makes its word's substitution scores here, from the
// columns [sbeg, send) that d2_row's score row covers (qoff as score4), instead of reading them back from a
// separate pass over the row; the word is stored as that pass would have left it (stale bytes kept).
__device__ __forceinline__ void d2_cells4(const Ksw2Arr& A, const Ksw2Sc& S, const Ksw2Band& b, int mode, u8* prow,
                                          ix c0, ix c1, int x1, int v1, int x21, ix qoff, ix sbeg, ix send) {
    u32* const U = (u32*)A.u;
    u32* const V = (u32*)A.v;
    u32* const X = (u32*)A.x;
    u32* const Y = (u32*)A.y;
    u32* const X2 = (u32*)A.x2;
    u32* const Y2 = (u32*)A.y2;
    const u32* const Sw = (const u32*)A.s;
    // the carried word: byte 3 is the left neighbour of the next step's first column
    u32 cx = (u32)(u8)x1 << 24, cv = (u32)(u8)v1 << 24, cx2 = (u32)(u8)x21 << 24;
    const ix w0 = c0 & ~(ix)3;
    if (w0 < c0) {  // the first word starts left of c0: its byte below c0 is the left neighbour itself
        cx = cv = cx2 = 0;
    }
    for (ix base = w0; base <= c1; base += 128) {
        G3_LANE(u32, ou);
        G3_LANE(u32, ov);
        G3_LANE(u32, ox);
        G3_LANE(u32, oy);
        G3_LANE(u32, ox2);
        G3_LANE(u32, oy2);
        G3_LANE(u32, os);
        G3_LANE(u32, px);
        G3_LANE(u32, pv);
        G3_LANE(u32, px2);
        G3_LANES {
            const ix t0 = base + 4 * lane;
            if (t0 <= c1) {
                const ix k = t0 >> 2;
                G3_L(ou) = U[k];
                G3_L(ov) = V[k];
                G3_L(ox) = X[k];
                G3_L(oy) = Y[k];
                G3_L(ox2) = X2[k];
                G3_L(oy2) = Y2[k];
#ifdef KSW2_FUSED_S
                if (t0 + 3 >= sbeg && t0 < send) {  // the word meets the row's fresh columns
                    const u32 keep = outside4(t0, sbeg, send), sc = score4(A, S, qoff, t0);
                    G3_L(os) = keep ? (sc & ~keep) | (Sw[k] & keep) : sc;
                    ((u32*)A.s)[k] = G3_L(os);
                } else {
                    G3_L(os) = Sw[k];
                }
#else
                G3_L(os) = Sw[k];
#endif
            } else {
                G3_L(ou) = G3_L(ov) = G3_L(ox) = G3_L(oy) = G3_L(ox2) = G3_L(oy2) = G3_L(os) = 0;
            }
        }
        KSW2_FROM_LEFT(px, pv, px2);
        G3_LANES {
            const ix t0 = base + 4 * lane;
            if (t0 <= c1) {
                // left neighbours: the word shifted up one byte, the previous word's byte 3 below
                const u32 lx = __byte_perm(G3_L(ox), G3_L(px), 0x2107);
                const u32 lv = __byte_perm(G3_L(ov), G3_L(pv), 0x2107);
                const u32 lx2 = __byte_perm(G3_L(ox2), G3_L(px2), 0x2107);
                u32 u = G3_L(ou), v = 0, x = 0, y = G3_L(oy), x2 = 0, y2 = G3_L(oy2);
                const u32 d = d2_cell4(mode, S, G3_L(os), lx, lv, lx2, u, v, x, y, x2, y2);
                const u32 keep = outside4(t0, c0, c1 + 1);  // bytes of columns outside [c0, c1]
                const ix k = t0 >> 2;
                U[k] = (u & ~keep) | (G3_L(ou) & keep);
                V[k] = (v & ~keep) | (G3_L(ov) & keep);
                X[k] = (x & ~keep) | (G3_L(ox) & keep);
                Y[k] = (y & ~keep) | (G3_L(oy) & keep);
                X2[k] = (x2 & ~keep) | (G3_L(ox2) & keep);
                Y2[k] = (y2 & ~keep) | (G3_L(oy2) & keep);
                if (prow)
                    for (int q = 0; q < 4; ++q)
                        if (!((keep >> (8 * q)) & 1)) prow[t0 + q - b.st] = (u8)(d >> (8 * q));
            }
        }
    }
}
#endif

// One anti-diagonal r: the first-column values, the substitution scores (in the SSE code's 16-cell chunks
// from st0, stale cells kept), then every cell of the widened band [b.st, b.en] that lies in the columns
// [clo, chi] (the forward pass: all of them). prow != 0: direction bytes to prow[t - b.st]. (last_st,
// last_en): the previous anti-diagonal's widened band (-1, -1 before r = 0). Ends synchronised: the arrays
// hold anti-diagonal r in [clo, chi]. Returns the number of cells computed.
//
// The traceback's cone. A block's traceback recomputes anti-diagonals r0..rs after restoring the checkpoint
// taken before r0, where (rs, ts) is the path's cell when it enters the block. Backwards the path's column
// never grows and drops by at most one per anti-diagonal, so on anti-diagonal rr it lies in [ts - (rs - rr),
// ts]. A cell reads its own column and the one to its left on the anti-diagonals before it, and these
// columns form a cone that only widens towards r0: every value a cell of [ts - (rs - rr), ts] reads (or the
// stale values it reads) was written, during the block, by the same writes as in the forward pass. So
// recomputing only that cone gives the forward pass's direction bits on every cell the path can visit:
// ~G*G/2 cells per block instead of G times the band width.
__device__ ix d2_row(const Ksw2Job& J, const Ksw2Arr& A, const Ksw2Sc& S, ix r, const Ksw2Band& b, ix last_st,
                       ix last_en, ix T, int mode, u8* prow, ix clo, ix chi KP_PARAM) {
    int x1, v1, x21;
    const ix c0 = b.st > clo ? b.st : clo, c1 = b.en < chi ? b.en : chi;  // the cells computed
    if (c0 > b.st) {  // the cone starts inside the band: the left neighbour is a cell of r - 1 (or stale)
        x1 = A.x[c0 - 1];
        x21 = A.x2[c0 - 1];
        v1 = A.v[c0 - 1];
    } else if (b.st > 0) {
        if (b.st - 1 >= last_st && b.st - 1 <= last_en) {
            x1 = A.x[b.st - 1];
            x21 = A.x2[b.st - 1];
            v1 = A.v[b.st - 1];
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
        A.y[r] = (i8)S.init1;
        A.y2[r] = (i8)S.init2;
        A.u[r] = (i8)edge_val(r, S);
    }
    ix tend = b.st0 + (b.en0 - b.st0 + 16) / 16 * 16;
    if (tend > T) tend = T;
    if (tend > chi + 1) tend = chi + 1;
    const ix sbeg = b.st0 > clo ? b.st0 : clo;
#ifdef KSW2_SIMD4
    const ix qoff = KSW2_QPAD + J.qlen - 1 - r;
    ix sfrom = sbeg & ~(ix)3;
#ifdef KSW2_FUSED_S
    // d2_cells4 makes the scores of the words it updates (those of [c0, c1]; c0 <= sbeg); here only the words
    // of the row past them
    if (c1 >= c0 && sfrom <= c1) sfrom = (c1 & ~(ix)3) + 4;
#endif
    G3_LANES {  // four columns per lane, as whole words; bytes outside [sbeg, tend) keep their (stale) values
        u32* const Sw = (u32*)A.s;
        for (ix t0 = sfrom + 4 * lane; t0 < tend; t0 += 128) {
            const u32 sc = score4(A, S, qoff, t0), keep = outside4(t0, sbeg, tend);
            Sw[t0 >> 2] = keep ? (sc & ~keep) | (Sw[t0 >> 2] & keep) : sc;
        }
    }
#else
    G3_LANES {
        for (ix t = sbeg + lane; t < tend; t += 32) A.s[t] = (i8)sub_score(A, S, J.qlen, r, t);
    }
#endif
    G3_SYNC();
    KP(kb_);
#ifdef KSW2_SIMD4
    d2_cells4(A, S, b, mode, prow, c0, c1, x1, v1, x21, qoff, sbeg, tend);
#else
    int cx = x1, cv = v1, cx2 = x21;  // left-neighbour values of the chunk's first cell (uniform)
    for (ix base = c0; base <= c1; base += 32) {
        G3_LANE(int, ou);
        G3_LANE(int, ov);
        G3_LANE(int, ox);
        G3_LANE(int, oy);
        G3_LANE(int, ox2);
        G3_LANE(int, oy2);
        G3_LANE(int, os);
        G3_LANE(int, lx);
        G3_LANE(int, lv);
        G3_LANE(int, lx2);
        G3_LANES {
            const ix t = base + lane;
            if (t <= c1) {
                G3_L(ou) = A.u[t];
                G3_L(ov) = A.v[t];
                G3_L(ox) = A.x[t];
                G3_L(oy) = A.y[t];
                G3_L(ox2) = A.x2[t];
                G3_L(oy2) = A.y2[t];
                G3_L(os) = A.s[t];
            } else {
                G3_L(ou) = G3_L(ov) = G3_L(ox) = G3_L(oy) = G3_L(ox2) = G3_L(oy2) = G3_L(os) = 0;
            }
        }
        KSW2_FROM_LEFT(lx, lv, lx2);
        G3_LANES {
            const ix t = base + lane;
            if (t <= c1) {
                int u = G3_L(ou), v = 0, x = 0, y = G3_L(oy), x2 = 0, y2 = G3_L(oy2);
                const int d = d2_cell(mode, S, G3_L(os), G3_L(lx), G3_L(lv), G3_L(lx2), u, v, x, y, x2, y2);
                A.u[t] = (i8)u;
                A.v[t] = (i8)v;
                A.x[t] = (i8)x;
                A.y[t] = (i8)y;
                A.x2[t] = (i8)x2;
                A.y2[t] = (i8)y2;
                if (prow) prow[t - b.st] = (u8)d;
            }
        }
    }
#endif
    G3_SYNC();
    KP(kb_ + 1);
    return c1 >= c0 ? c1 - c0 + 1 : 0;
}

// 16 bytes, copied as one 128-bit load and store on the GPU
#ifdef G3_REAL_WARP
typedef uint4 Ksw2B16;
#else
struct alignas(16) Ksw2B16 {
    u32 w[4];
};
#endif

// The checkpoint copy of the 7 arrays' columns [lo, lo + n) to (save) or from the checkpoint ck (rows of ckw
// bytes). lo, n and ckw are multiples of 16 (block_cols, job_geometry), and so are the arrays' and the
// checkpoint's offsets in the job's 16-aligned scratch: 16 bytes per lane and step.
__device__ __forceinline__ void copy_arrays(const Ksw2Arr& A, u8* ck, ix ckw, ix lo, ix n, bool save) {
    i8* const arr[7] = {A.u, A.v, A.x, A.y, A.x2, A.y2, A.s};
    G3_LANES {
#pragma unroll
        for (int k = 0; k < 7; ++k) {
            Ksw2B16* const c = (Ksw2B16*)(ck + k * ckw);
            Ksw2B16* const a = (Ksw2B16*)(arr[k] + lo);
            for (ix i = lane; i < n >> 4; i += 32) {
                if (save)
                    c[i] = a[i];
                else
                    a[i] = c[i];
            }
        }
    }
    G3_SYNC();
}

// The columns [lo, hi] that anti-diagonals [r0, r0 + G) read (or write) and that must be restored before
// recomputing them: from the first one's st - 1 to the last one's en (both bounds grow with r), widened to
// whole 16-byte blocks (st and en + 1 are multiples of 16, and so is T: lo = st - 16, hi + 1 a multiple of 16).
__device__ __forceinline__ void block_cols(ix r0, int G, ix nr, ix qlen, ix tlen, ix w, ix T, ix* lo, ix* hi) {
    const Ksw2Band b0 = band_of(r0, qlen, tlen, w);
    ix r1 = r0 + G - 1;
    if (r1 > nr - 1) r1 = nr - 1;
    const Ksw2Band b1 = band_of(r1, qlen, tlen, w);
    *lo = b0.st > 0 ? b0.st - 16 : 0;
    *hi = b1.en < T - 1 ? b1.en : T - 1;
}

// KSW2_MIN_BLOCKS (benchmarks: scripts/ksw2_jobs.py --variants): __launch_bounds__(128, KSW2_MIN_BLOCKS), so
// that ptxas keeps the registers per thread low enough for that many 128-thread blocks per SM.
#if defined(G3_REAL_WARP) && defined(KSW2_MIN_BLOCKS)
#define KSW2_BOUNDS __launch_bounds__(128, KSW2_MIN_BLOCKS)
#else
#define KSW2_BOUNDS
#endif

extern "C" __global__ void KSW2_BOUNDS ksw_extd2_warp(const u8* __restrict__ Q, const u8* __restrict__ Tg,
                                          const i64* __restrict__ jobs, const i64* __restrict__ geo,
                                          const i64* __restrict__ order, i64 n_job, const int* __restrict__ P, int G,
                                          u8* __restrict__ scratch, i64* __restrict__ ez_out, u32* __restrict__ cig,
                                          const i64* __restrict__ cig_off, i64* __restrict__ n_cig,
                                          int* __restrict__ err, i64* __restrict__ cells_out) {
    const i64 n_warp = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 k = (((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5); k < n_job; k += n_warp) {
        const i64 jid = order[k];
        KP_DECL;
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
        ix w = (ix)jr[J_W];
        const int* p = P + jr[J_PSET] * P_NF;
        const int* mat = p + 4;
        ix ez[EZ_N];
        ez[EZ_MAX] = 0;
        ez[EZ_ZDROPPED] = 0;
        ez[EZ_MAX_Q] = ez[EZ_MAX_T] = ez[EZ_MQE_T] = ez[EZ_MTE_Q] = -1;
        ez[EZ_MQE] = ez[EZ_MTE] = ez[EZ_SCORE] = KSW2_NEG_INF;
        ez[EZ_REACH_END] = 0;
        ix nc = 0;       // CIGAR words
        i64 n_cells = 0;  // DP cells computed (widened bands, forward pass + recomputation)
        u32* cg = cig + cig_off[jid];
        const ix qlen = J.qlen, tlen = J.tlen;

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
            const ix T = (tlen + 15) / 16 * 16, nr = qlen + tlen - 1;
            if (e != e2) {
                // C integer division (truncation), as in the kernel
                const ix num = q2 - q, den = e - e2;
                S.long_thres = num / den - 1;
            } else {
                S.long_thres = 0;
            }
            if ((ix)q2 + e2 + S.long_thres * e2 > (ix)q + e + S.long_thres * e) S.long_thres += 1;
            S.long_diff = S.long_thres * (e - e2) - (q2 - q) - e2;

            u8* ws = scratch + geo[jid * 3];
            const ix ckw = (ix)geo[jid * 3 + 1], pw = (ix)geo[jid * 3 + 2];
            Ksw2Arr A;
            A.u = (i8*)ws;
            A.v = A.u + T;
            A.x = A.v + T;
            A.y = A.x + T;
            A.x2 = A.y + T;
            A.y2 = A.x2 + T;
            A.s = A.y2 + T;
            A.tg = (u8*)(A.s + T);
            A.qr = A.tg + T;
            u8* tail = A.qr + (qlen + 47) / 16 * 16;  // job_geometry's query area (KSW2_QPAD, padding)
            int* H = (int*)tail;
            if (!approx_max) tail += T * 4;
            u8* ckpt = tail;
            const ix n_blk = (nr + G - 1) / G;
            u8* pblk = ckpt + (with_cigar ? (i64)n_blk * 7 * ckw : 0);
            G3_LANES {
                for (ix i = lane; i < T; i += 32) {
                    A.u[i] = A.v[i] = A.x[i] = A.y[i] = (i8)S.init1;
                    A.x2[i] = A.y2[i] = (i8)S.init2;
                    A.s[i] = 0;
                    if (!approx_max) H[i] = KSW2_NEG_INF;
                    A.tg[i] = i < tlen ? (u8)job_base(J.t, tlen, J.t_mode, i) : 0;
                }
                const ix nq = (qlen + 47) / 16 * 16;
                for (ix i = lane; i < nq; i += 32) {
                    const ix k = i - KSW2_QPAD;
                    A.qr[i] = k >= 0 && k < qlen ? (u8)job_base(J.q, qlen, J.q_mode, qlen - 1 - k) : 0;
                }
            }
            G3_SYNC();

            // ---------------------------------------------------------------- forward pass
            KP(KP_INIT);
            ix H0 = 0, last_H0_t = 0, last_st = -1, last_en = -1;
            bool bad = false;
            for (ix r = 0; r < nr; ++r) {
                const Ksw2Band b = band_of(r, qlen, tlen, w);
                if (b.st0 > b.en0) {
                    ez[EZ_ZDROPPED] = 1;
                    break;
                }
                if (with_cigar) {
                    if (b.en - b.st + 1 > pw) {  // job_geometry's bounds (never expected to fail)
                        bad = true;
                        break;
                    }
                    if (r % G == 0) {
                        ix lo, hi;
                        block_cols(r, G, nr, qlen, tlen, w, T, &lo, &hi);
                        if (hi - lo + 1 > ckw) {
                            bad = true;
                            break;
                        }
                        copy_arrays(A, ckpt + (i64)(r / G) * 7 * ckw, ckw, lo, hi - lo + 1, true);
                    }
                }
                KP(KP_CKPT);
                n_cells += d2_row(J, A, S, r, b, last_st, last_en, T, mode, (u8*)0, 0, T KP_ARG(KP_FWD_S));
                if (!approx_max) {
                    ix max_H, max_t;
                    if (r > 0) {
                        // H[en0] first, from H[en0 - 1] before its update (the SSE code's order)
                        const int hE = b.en0 > 0 ? H[b.en0 - 1] + (int)A.u[b.en0] : H[b.en0] + (int)A.v[b.en0];
                        G3_SYNC();
                        const ix en1 = b.st0 + (b.en0 - b.st0) / 4 * 4;
                        G3_LANE(i64, key);
                        G3_LANES {
                            i64 kk = (i64)(-0x7fffffffffffffffLL - 1);
                            for (ix t = b.st0 + lane; t < b.en0; t += 32) {
                                const int h = H[t] + (int)A.v[t];
                                H[t] = h;
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
                        H[b.en0] = hE;
                        G3_SYNC();
                        i64 kA;
                        G3_MAX64(kA, key);
                        max_H = hE;
                        max_t = b.en0;
                        if (en1 > b.st0) {
                            const ix vA = (ix)(kA >> 32);
                            if (vA > max_H) {
                                max_H = vA;
                                max_t = b.st0 + (ix)(0x0FFFFFFF - (kA & 0x0FFFFFFF));
                            }
                        }
                        for (ix t = en1; t < b.en0; ++t)
                            if (H[t] > max_H) {
                                max_H = H[t];
                                max_t = t;
                            }
                    } else {
                        const int h0 = (int)A.v[0] - (int)S.qe;
                        H[0] = h0;
                        G3_SYNC();
                        max_H = h0;
                        max_t = 0;
                    }
                    if (b.en0 == tlen - 1 && H[b.en0] > ez[EZ_MTE]) {
                        ez[EZ_MTE] = H[b.en0];
                        ez[EZ_MTE_Q] = r - b.en;
                    }
                    if (r - b.st0 == qlen - 1 && H[b.st0] > ez[EZ_MQE]) {
                        ez[EZ_MQE] = H[b.st0];
                        ez[EZ_MQE_T] = b.st0;
                    }
                    // Z-drop (aligner/map/ksw2.py _zdrop)
                    bool drop = false;
                    if (max_H > ez[EZ_MAX]) {
                        ez[EZ_MAX] = max_H;
                        ez[EZ_MAX_T] = max_t;
                        ez[EZ_MAX_Q] = r - max_t;
                    } else if (max_t >= ez[EZ_MAX_T] && r - max_t >= ez[EZ_MAX_Q]) {
                        const ix tl = max_t - ez[EZ_MAX_T], ql = (r - max_t) - ez[EZ_MAX_Q];
                        const ix gap = tl > ql ? tl - ql : ql - tl;
                        if (zdrop >= 0 && ez[EZ_MAX] - max_H > zdrop + gap * e2) {
                            ez[EZ_ZDROPPED] = 1;
                            drop = true;
                        }
                    }
                    if (drop) break;
                    if (r == qlen + tlen - 2 && b.en0 == tlen - 1) ez[EZ_SCORE] = H[tlen - 1];
                    G3_SYNC();  // the uniform reads of H are done before the next anti-diagonal writes it
                } else {
                    if (r > 0) {
                        if (last_H0_t >= b.st0 && last_H0_t <= b.en0 && last_H0_t + 1 >= b.st0 &&
                            last_H0_t + 1 <= b.en0) {
                            const ix d0 = A.v[last_H0_t], d1 = A.u[last_H0_t + 1];
                            if (d0 > d1) {
                                H0 += d0;
                            } else {
                                H0 += d1;
                                ++last_H0_t;
                            }
                        } else if (last_H0_t >= b.st0 && last_H0_t <= b.en0) {
                            H0 += A.v[last_H0_t];
                        } else {
                            ++last_H0_t;
                            H0 += A.u[last_H0_t];
                        }
                    } else {
                        H0 = (ix)A.v[0] - S.qe;
                        last_H0_t = 0;
                    }
                    bool drop = false;
                    if (flag & KSW_EZ_APPROX_DROP) {
                        if (H0 > ez[EZ_MAX]) {
                            ez[EZ_MAX] = H0;
                            ez[EZ_MAX_T] = last_H0_t;
                            ez[EZ_MAX_Q] = r - last_H0_t;
                        } else if (last_H0_t >= ez[EZ_MAX_T] && r - last_H0_t >= ez[EZ_MAX_Q]) {
                            const ix tl = last_H0_t - ez[EZ_MAX_T], ql = (r - last_H0_t) - ez[EZ_MAX_Q];
                            const ix gap = tl > ql ? tl - ql : ql - tl;
                            if (zdrop >= 0 && ez[EZ_MAX] - H0 > zdrop + gap * e2) {
                                ez[EZ_ZDROPPED] = 1;
                                drop = true;
                            }
                        }
                    }
                    if (drop) break;
                    if (r == qlen + tlen - 2 && b.en0 == tlen - 1) ez[EZ_SCORE] = H0;
                    G3_SYNC();
                }
                last_st = b.st;
                last_en = b.en;
                KP(KP_FWD_MAX);
            }
            KP(KP_FWD_MAX);
            if (bad) {
                G3_LANES {
                    if (lane == 0) atomicOr(err, KSW2_ERR_GEOMETRY);
                }
            } else if (with_cigar) {
                // ------------------------------------------------------------ the traceback's start
                const bool rev_cigar = (flag & KSW_EZ_REV_CIGAR) != 0;
                ix i0 = -1, j0 = -1;
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
                    ix i = i0, j = j0, cur_blk = -1;
                    int state = 0;
                    u32 pend = 0;  // the CIGAR op being extended (merged runs), written when it changes
                    while (i >= 0 && j >= 0) {
                        const ix r = i + j;
                        const ix blk = r / G;
                        if (blk != cur_blk) {  // recompute the block's cone (see d2_row) up to r with directions
                            KP(KP_TB_WALK);
                            const ix r0 = blk * G;
                            ix lo, hi;
                            block_cols(r0, G, nr, qlen, tlen, w, T, &lo, &hi);
                            // the columns of the checkpoint the cone reads, widened to whole 16-byte blocks
                            // (restoring more columns changes nothing the walk reads: every later block
                            // restores the columns of its own cone first)
                            ix rlo = (i - (r - r0) - 1) & ~(ix)15;
                            if (rlo < lo) rlo = lo;
                            ix rhi = i < hi ? (i | 15) : hi;
                            KSW2_OPAQUE(rlo);
                            KSW2_OPAQUE(rhi);
                            if (rhi >= rlo)
                                copy_arrays(A, ckpt + (i64)blk * 7 * ckw + (rlo - lo), ckw, rlo, rhi - rlo + 1, false);
                            KP(KP_TB_RESTORE);
                            for (ix rr = r0; rr <= r; ++rr) {
                                const Ksw2Band bb = band_of(rr, qlen, tlen, w);
                                ix ls = -1, le = -1;
                                if (rr > 0) {
                                    const Ksw2Band bp = band_of(rr - 1, qlen, tlen, w);
                                    ls = bp.st;
                                    le = bp.en;
                                }
                                n_cells += d2_row(J, A, S, rr, bb, ls, le, T, mode, pblk + (rr - r0) * pw,
                                                  i - (r - rr), i KP_ARG(KP_TB_S));
                            }
                            cur_blk = blk;
                        }
                        const Ksw2Band br = band_of(r, qlen, tlen, w);
                        int force = -1, tmp = 0;
                        if (i < br.st) force = 2;
                        if (i > br.en) force = 1;
                        if (force < 0) tmp = pblk[(r - blk * G) * pw + (i - br.st)];
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
                        G3_SYNC();  // the uniform reads of this block's rows are done (next recompute rewrites)
                    }
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
                            for (ix a = lane; a < nc / 2; a += 32) {
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
        KP(KP_TB_WALK);
        KP_FLUSH;
        G3_LANES {
            if (lane == 0) {
                for (int f = 0; f < EZ_N; ++f) ez_out[jid * EZ_N + f] = ez[f];
                n_cig[jid] = nc;
                if (cells_out) cells_out[jid] = n_cells;
            }
        }
    }
}

// The packed CIGARs' offsets (ksw2_gpu.extd2_batch_gpu, compact=True): out_off[k] = n_cig[0] + ... + n_cig[k - 1]
// for k <= n_job, in one block (a few 100k jobs a batch): each thread sums a run of jobs, the block scans the runs'
// sums, then each thread writes its run's offsets. Launched behind the ksw2 launches, so the packing needs no
// round trip to the host. GPU only (the host build's warp emulation has no block barrier); its twin is np.cumsum
// (tests/test_ksw2_gpu.py).
#ifdef G3_REAL_WARP
#define KSW_SCAN_THREADS 1024
extern "C" __global__ void __launch_bounds__(KSW_SCAN_THREADS) ksw_cig_offsets(const i64* __restrict__ n_cig,
                                                                              i64 n_job, i64* __restrict__ out_off) {
    __shared__ i64 run_sum[KSW_SCAN_THREADS];
    const int t = threadIdx.x;
    const i64 per = (n_job + KSW_SCAN_THREADS - 1) / KSW_SCAN_THREADS;
    const i64 lo = min(n_job, (i64)t * per), hi = min(n_job, lo + per);
    i64 s = 0;
    for (i64 k = lo; k < hi; ++k) s += n_cig[k];
    run_sum[t] = s;
    __syncthreads();
    for (int d = 1; d < KSW_SCAN_THREADS; d <<= 1) {  // inclusive scan of the runs' sums
        const i64 v = t >= d ? run_sum[t - d] : 0;
        __syncthreads();
        run_sum[t] += v;
        __syncthreads();
    }
    i64 acc = t > 0 ? run_sum[t - 1] : 0;
    for (i64 k = lo; k < hi; ++k) {
        out_off[k] = acc;
        acc += n_cig[k];
    }
    if (t == KSW_SCAN_THREADS - 1) out_off[n_job] = run_sum[t];
}
#endif

// The CIGARs moved together for the copy to the host (ksw2_gpu.extd2_batch_gpu, compact=True): job k's n_cig[k]
// words from cig[cig_off[k]] to out[out_off[k]], one warp per job. The kernel leaves each job room for its longest
// CIGAR (qlen + tlen + 2 words, ~3 KB a chr20 map-pb job), while it uses ~1/10 of that.
extern "C" __global__ void ksw_cig_compact(const u32* __restrict__ cig, const i64* __restrict__ cig_off,
                                           const i64* __restrict__ n_cig, const i64* __restrict__ out_off,
                                           i64 n_job, u32* __restrict__ out) {
    const i64 n_warp = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 k = (((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5); k < n_job; k += n_warp) {
        const u32* const src = cig + cig_off[k];
        u32* const dst = out + out_off[k];
        const i64 n = n_cig[k];
        G3_LANES {
            for (i64 i = lane; i < n; i += 32) dst[i] = src[i];
        }
    }
}
