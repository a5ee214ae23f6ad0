// kernels/pairwise.cu -- pairwise DP alignment (global / semiglobal / local; affine or linear gaps).
//
// Launcher and CPU twin (the oracle, same recurrences, same tie-breaking): aligner/pairwise/engine.py.
// Recurrences follow Gotoh as written in ksw2/bwa (ksw_extend2, ksw_global2): rows i = query
// (1..m), columns j = target (1..n), gap of length L costs GO + L*GE (GO = 0: linear gaps).
//   E(i,j) = max(E(i,j-1) - GE, H(i,j-1) - GO - GE)        gap in the query  -> CIGAR D
//   F(i,j) = max(F(i-1,j) - GE, H(i-1,j) - GO - GE)        gap in the target -> CIGAR I
//   H(i,j) = max(H(i-1,j-1) + s(q_i, t_j), E(i,j), F(i,j) [, 0 for local])
//   s(a,b) = MATCH if a == b < 4, -1 if either base is N (code 4; bwa's rule), else -MISMATCH.
//
// Thread mapping ("group" = LANES consecutive threads of one warp; LANES in 1,2,4,...,32):
//   one group aligns one pair.  The query is cut into strips of SR = LANES*R rows; lane k of the
//   group holds rows [k*R, k*R+R) of the strip in registers (H, H-GO-GE, E and the query base of
//   each row) and sweeps the target columns as an anti-diagonal wavefront: at step tt lane k works
//   on column j = tt - k + 1 and receives the bottom H and F of column j from lane k-1 through
//   __shfl_up_sync (its value of the previous step).  LANES = 1 is the inter-query scheme (one
//   thread per pair, R rows of register tiling); LANES > 1 the intra-query scheme.
//   Between strips, the last lane writes the strip's bottom row (H, F per column) to global memory
//   (`bnd`), and lane 0 of the next strip reads it back (SALoBa-style boundary spilling).
//   Rows past the query end are padded with N (score -1), which can never produce a maximum.
//
// Kernels:
//   pw_batch  one group per pair, many pairs (regimes 1 and 2).  With TRACE=1 every cell also
//             writes 4 direction bits (R cells per 32-bit word, one word per lane per step, so the
//             words of a group are coalesced) and lane 0 walks the path back and writes a
//             run-length CIGAR (BAM encoding len<<4|op, op M=0 I=1 D=2).
//   pw_chain  one pair, many warps (regime 3): warp w handles strips w, w+W, w+2W, ...; strip s
//             waits on progress[s-1] (published every CHUNK columns with __threadfence) before
//             reading the boundary row of strip s-1 from a ring of W buffers.  All W warps must be
//             co-resident (the launcher sizes the grid from the occupancy calculator).
//             Score only; each warp writes its best cell, the host reduces.
//   pw_chain_batch  pw_chain for a batch of long pairs (regime 2, score only): (pair, strip) work
//             items over W persistent warps, several pairs interleaved strip by strip (see its section).
//   pw_batch16  16-bit packed score path (two pairs per group, Hopper DPX; see its section).
//   pw_batch16_ck  pw_batch16 that also stores the grid checkpoints, unpacked to pw_batch_ck's layout.
//   pw_tb16   16-bit traceback of short pairs (two per warp, m <= 32*R): direction bits of the whole
//             pairs in shared memory, walked in the same kernel (see its section).
//   pw_batch_ck / pw_chain_ck  pw_batch / pw_chain (TRACE=0) that also store grid checkpoints:
//             H, F of every BH-th row and H, E of every GW-th column.
//   pw_tb     (TRACE=1) gridded traceback: per pair, recompute each BH x GW block the path enters
//             from the checkpoints (direction nibbles of that block only, in shared memory or a
//             per-group scratch) and walk it.  Batched pairs: pw_batch_ck then pw_tb; one huge
//             pair: pw_chain_ck then pw_tb with one warp (linear-space traceback: O((m/BH)*n +
//             (n/GW)*m) checkpoint memory, never the m x n matrix).  Same nibbles, same walk,
//             so the CIGARs equal the full-matrix walk's.
//
// Tie-breaking (identical in the CPU twin):
//   best cell: highest score, then smallest target end j, then smallest query end i.
//   direction of H: (local and H == 0) -> stop; H == diag + s -> M; H == E -> D; else I.
//   E/F: extend only when strictly better than opening (ties open a new gap).
//
// Compile-time constants (prepended as #defines by kernels/loader.py; defaults below only make
// `nvcc -arch=sm_90 -cubin kernels/pairwise.cu` build standalone).

#ifndef LANES
#define LANES 32
#endif
#ifndef R
#define R 8
#endif
#ifndef MODE            // 0 global, 1 semiglobal (query global, target local), 2 local
#define MODE 2
#endif
#ifndef MATCH
#define MATCH 1
#endif
#ifndef MISMATCH
#define MISMATCH 4
#endif
#ifndef GO
#define GO 6
#endif
#ifndef GE
#define GE 1
#endif
#ifndef TRACE
#define TRACE 0
#endif
#ifndef BAND            // < 0: no band; else cells with |i - j| > BAND are unreachable
#define BAND -1
#endif
#ifndef CHUNK           // pw_chain: publish progress every CHUNK columns
#define CHUNK 64
#endif
#ifndef TBPROF          // pw_tb16: record clock64 cycles of the forward pass and of the walk per group
#define TBPROF 0
#endif

#define SR (LANES * R)
#define GOE (GO + GE)
#define NEG (-0x20000000)

typedef unsigned char u8;

struct Best { int s, i, j; };

// a better than b: higher score, then smaller j, then smaller i
__device__ __forceinline__ bool better(int as, int ai, int aj, int bs, int bi, int bj) {
    return as > bs || (as == bs && (aj < bj || (aj == bj && ai < bi)));
}

__device__ __forceinline__ int rowinit(int j) {          // H(0, j)
#if BAND >= 0
    if (j > BAND) return NEG;
#endif
#if MODE == 0
    return j == 0 ? 0 : -(GO + j * GE);
#else
    return 0;
#endif
}

__device__ __forceinline__ int colinit(int i) {          // H(i, 0)
#if BAND >= 0
    if (i > BAND) return NEG;
#endif
#if MODE == 2
    return 0;
#else
    return i == 0 ? 0 : -(GO + i * GE);
#endif
}

__device__ __forceinline__ void best_init(Best& b, int m, int n) {
#if MODE == 0
    b.s = -0x7fffffff; b.i = m; b.j = n;
#elif MODE == 1
    b.s = colinit(m); b.i = m; b.j = 0;
#else
    b.s = 0; b.i = 0; b.j = 0;
#endif
}

// Grid checkpoints (gridded / linear-space traceback).  Forward pass (CK): the bottom row (H, F) of
// every BH-th row (BH = a multiple of SR) goes to rck[(i/BH - 1)*(n+1) + j], and every GW-th column
// (H, E of rows 1..m) to cck[(j/GW - 1)*m + i - 1].  Block recompute (BLK): rows of strip s,
// columns c0+1..jhi (c0 a multiple of GW), left boundary from cck at column c0 (or the border).
struct Ck {
    int2* rck; int2* cck; int BH; int GW; int c0; int jhi;
};

__device__ __forceinline__ int hleft(const Ck& ck, int m, int i) {    // H(i, c0)
    if (ck.c0 == 0) return colinit(i);
    if (i == 0) return rowinit(ck.c0);
    return __ldcg(&ck.cck[(long long)(ck.c0 / ck.GW - 1) * m + i - 1]).x;
}

// One strip of SR rows of one pair, all target columns (BLK: columns c0+1..jhi).
//   bin/bout: boundary rows (H, F) of the strip above / this strip, element j at [j*bjs + slot].
//   CHAINED: spin on prog_in before reading bin, publish prog_out after writing bout.
template <bool CHAINED, bool CK = false, bool BLK = false>
__device__ __forceinline__ void dp_strip(
    const u8* __restrict__ q, int m, const u8* __restrict__ t, int n, int s, int lane, unsigned gmask,
    const int2* bin, int2* bout, long long bjs, long long slot_in, long long slot_out,
    const volatile int* prog_in, volatile int* prog_out, Best& best, unsigned* __restrict__ dirw,
    const Ck& ck = Ck{nullptr, nullptr, 1, 1, 0, 0})
{
    const int row0 = s * SR + lane * R;          // DP index of the row above this lane's first row
    const bool last_strip = (s + 1) * SR >= m;
    const int c0 = BLK ? ck.c0 : 0;              // columns c0+1 .. jhi
    const int jhi = BLK ? ck.jhi : n;
    int qc[R], mis[R], Hl[R], Hg[R], E[R];       // per row: base, mismatch score, H(i,j-1), H-GOE, E
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int idx = row0 + r;
        const int c = idx < m ? (int)q[idx] : 4;
        qc[r] = c;
        mis[r] = c > 3 ? -1 : -MISMATCH;
        Hl[r] = colinit(idx + 1);
        E[r] = NEG;
        if (BLK && c0 > 0 && idx < m) {
            const int2 v = __ldcg(&ck.cck[(long long)(c0 / ck.GW - 1) * m + idx]);
            Hl[r] = v.x; E[r] = v.y;
        }
        Hg[r] = Hl[r] - GOE;
    }
    const int rm = m - 1 - row0;                 // index in this lane of query row m (if 0 <= rm < R)
    const bool owns_m = last_strip && rm >= 0 && rm < R;
    (void)owns_m;
    // CK: this strip's bottom row is a grid row (written by the last lane); next grid column
    int2* rck_row = nullptr;
    int cnext = 0x7fffffff;
    if (CK) {
        if (!last_strip && ((s + 1) * SR) % ck.BH == 0) rck_row = ck.rck + (long long)((s + 1) * SR / ck.BH - 1) * (n + 1);
        cnext = ck.GW;
    }
    (void)rck_row;
    int hdiag = BLK ? hleft(ck, m, row0) : colinit(row0);   // H(row0, j-1)
    int up_h = 0, up_f = NEG;                    // H(row0, j), F(row0, j)
    int bh = 0, bf = NEG;                        // this lane's bottom H, F of the current column
    // The boundary row of the strip above is prefetched one block of LANES columns ahead: lane k
    // holds column jb+k of the current block (cur_*) and loads column jb+LANES+k (nx_*), so the
    // L2 latency is off lane 0's critical path; lane 0 picks its column with a shuffle.
    int avail = 0;                               // CHAINED: columns of strip s-1 known to be ready
    int cur_h = 0, cur_f = NEG, nx_h = 0, nx_f = NEG;
    if (s > 0) {
        if (CHAINED) {
            const int need = min(LANES, n);
            if (lane == 0) { int a; do { a = *prog_in; } while (a < need); avail = a; __threadfence(); }
            avail = __shfl_sync(gmask, avail, 0, LANES);
        }
        if (c0 + 1 + lane <= jhi) {
            const int2 v = __ldcg(&bin[(long long)(c0 + 1 + lane) * bjs + slot_in]);
            nx_h = v.x; nx_f = v.y;
        }
    }
    const int nsteps = jhi - c0 + LANES - 1;
    for (int tt = 0; tt < nsteps; ++tt) {
        const int j = c0 + tt - lane + 1;
        const bool active = j >= c0 + 1 && j <= jhi;
        if (s > 0) {                             // uniform over the group
            const int k = tt % LANES;
            if (k == 0) {
                cur_h = nx_h; cur_f = nx_f;
                const int jn = c0 + tt + LANES + 1 + lane;
                if (CHAINED) {
                    const int need = min(tt + 2 * LANES, n);
                    if (need > avail) {
                        if (lane == 0) { int a; do { a = *prog_in; } while (a < need); avail = a; __threadfence(); }
                        avail = __shfl_sync(gmask, avail, 0, LANES);
                    }
                }
                if (jn <= jhi) {
                    const int2 v = __ldcg(&bin[(long long)jn * bjs + slot_in]);
                    nx_h = v.x; nx_f = v.y;
                }
            }
#if LANES > 1
            const int vh = __shfl_sync(gmask, cur_h, k, LANES);
            const int vf = __shfl_sync(gmask, cur_f, k, LANES);
#else
            const int vh = cur_h, vf = cur_f;
#endif
            if (lane == 0 && active) { up_h = vh; up_f = vf; }
        } else if (lane == 0 && active) {
            up_h = rowinit(j); up_f = NEG;
        }
        if (active) {
            const int tc0 = (int)t[j - 1];
            const bool tn = tc0 > 3;
            const int tc = tn ? 7 : tc0;         // an N never equals a query base
            int h_d = hdiag;                     // H(i-1, j-1)
            hdiag = up_h;
            int f = up_f;                        // F(i-1, j)
            int hug = up_h - GOE;                // H(i-1, j) - GOE
#if MODE == 2
            int cmax = NEG;
#endif
#if TRACE
            unsigned word = 0;
#endif
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int sc = qc[r] == tc ? MATCH : (tn ? -1 : mis[r]);
                const int ee = E[r] - GE, fe = f - GE;
                const int e = max(ee, Hg[r]);
                f = max(fe, hug);
                const int hd = h_d + sc;
#if MODE == 2
                int h = max(max(hd, 0), max(e, f));
#else
                int h = max(hd, max(e, f));
#endif
#if TRACE
                unsigned d;
#if MODE == 2
                d = h == 0 ? 3u : (h == hd ? 0u : (h == e ? 1u : 2u));
#else
                d = h == hd ? 0u : (h == e ? 1u : 2u);
#endif
                d |= (ee > Hg[r] ? 4u : 0u) | (fe > hug ? 8u : 0u);
                word |= d << (4 * r);
#endif
                int e2 = e;
#if BAND >= 0
                {
                    const int di = row0 + r + 1 - j;
                    if (di > BAND || -di > BAND) { h = NEG; e2 = NEG; f = NEG; }
                }
#endif
                h_d = Hl[r];
                Hl[r] = h;
                hug = h - GOE;
                Hg[r] = hug;
                E[r] = e2;
#if MODE == 2
                cmax = max(cmax, h);
#endif
            }
            bh = Hl[R - 1]; bf = f;
#if TRACE
            dirw[(long long)tt * LANES + lane] = word;
#endif
            if (lane == LANES - 1 && !last_strip) {
                bout[(long long)j * bjs + slot_out] = make_int2(bh, bf);
                if (CK && rck_row) rck_row[j] = make_int2(bh, bf);
                if (CHAINED && ((j & (CHUNK - 1)) == 0 || j == n)) {
                    __threadfence();
                    *prog_out = j;
                }
            }
            if (CK && j == cnext) {
                if (j < n) {
                    int2* cc = ck.cck + (long long)(j / ck.GW - 1) * m;
#pragma unroll
                    for (int r = 0; r < R; ++r) if (row0 + r < m) cc[row0 + r] = make_int2(Hl[r], E[r]);
                }
                cnext += ck.GW;
            }
            if (BLK) goto next_step;
#if MODE == 2
            if (cmax > best.s || (cmax == best.s && j < best.j)) {
                int bi = 0;
#pragma unroll
                for (int r = R - 1; r >= 0; --r) if (Hl[r] == cmax) bi = row0 + r + 1;
                best.s = cmax; best.i = bi; best.j = j;
            }
#elif MODE == 1
            if (owns_m) {
                int hm = 0;
#pragma unroll
                for (int r = 0; r < R; ++r) if (r == rm) hm = Hl[r];
                if (hm > best.s) { best.s = hm; best.i = m; best.j = j; }
            }
#else
            if (owns_m && j == n) {
                int hm = 0;
#pragma unroll
                for (int r = 0; r < R; ++r) if (r == rm) hm = Hl[r];
                best.s = hm; best.i = m; best.j = n;
            }
#endif
        }
    next_step:;
#if LANES > 1
        const int nh = __shfl_up_sync(gmask, bh, 1, LANES);
        const int nf = __shfl_up_sync(gmask, bf, 1, LANES);
        if (lane > 0) { up_h = nh; up_f = nf; }
#endif
    }
}

__device__ __forceinline__ void group_reduce(Best& b, unsigned gmask) {
#if LANES > 1
#pragma unroll
    for (int o = LANES / 2; o > 0; o >>= 1) {
        const int s2 = __shfl_xor_sync(gmask, b.s, o, LANES);
        const int i2 = __shfl_xor_sync(gmask, b.i, o, LANES);
        const int j2 = __shfl_xor_sync(gmask, b.j, o, LANES);
        if (better(s2, i2, j2, b.s, b.i, b.j)) { b.s = s2; b.i = i2; b.j = j2; }
    }
#endif
}

#if TRACE
// Direction nibble of cell (i, j), i, j >= 1, in the layout dp_strip writes (SHARED: d is in shared
// memory, written by this warp).
template <bool SHARED = false>
__device__ __forceinline__ unsigned dir_at(const unsigned* d, int n, int i, int j) {
    const int w = i - 1, s = w / SR, k = w - s * SR, ln = k / R, r = k - ln * R;
    const long long x = ((long long)s * (n + LANES - 1) + (j - 1 + ln)) * LANES + ln;
    const unsigned word = SHARED ? d[x] : __ldcg(&d[x]);
    return (word >> (4 * r)) & 15u;
}

#define PUSH_OP(op, len) do {                                                   \
    if ((op) == cur_op) cur_len += (len);                                       \
    else { if (cur_len) cig[nc++] = (cur_len << 4) | cur_op; cur_op = (op); cur_len = (len); } \
} while (0)

// Walk back from (i, j); writes the CIGAR (forward order) and returns its length.
__device__ int walk(const unsigned* d, int n, int i, int j, unsigned* cig, int* qs, int* ts) {
    int nc = 0; unsigned cur_op = 0, cur_len = 0; int state = 0;   // 0 H, 1 E (D), 2 F (I)
    for (;;) {
#if MODE == 2
        if (i == 0 || j == 0) break;
#else
        if (i == 0) {
#if MODE == 0
            if (j > 0) PUSH_OP(2u, (unsigned)j);
            j = 0;
#endif
            break;
        }
        if (j == 0) { PUSH_OP(1u, (unsigned)i); i = 0; break; }
#endif
        const unsigned nib = dir_at(d, n, i, j);
        if (state == 0) {
            const unsigned dd = nib & 3u;
            if (dd == 3u) break;
            if (dd == 0u) { PUSH_OP(0u, 1u); --i; --j; }
            else state = (int)dd;
        } else if (state == 1) {
            PUSH_OP(2u, 1u); --j; state = (nib & 4u) ? 1 : 0;
        } else {
            PUSH_OP(1u, 1u); --i; state = (nib & 8u) ? 2 : 0;
        }
    }
    if (cur_len) cig[nc++] = (cur_len << 4) | cur_op;
    for (int a = 0, b = nc - 1; a < b; ++a, --b) { const unsigned x = cig[a]; cig[a] = cig[b]; cig[b] = x; }
    *qs = i; *ts = j;
    return nc;
}
#endif

// Many pairs, one group each.  order[g] = pair handled by group g; outputs indexed by pair.
//   bnd: (max n + 1) * G int2 scratch, column j of group g at [j*G + g].
//   TRACE: dirs + dir_off[p] holds nstrips*(n+LANES-1)*LANES words; cig + cig_off[p] has room
//   for m+n runs; tb[3p..3p+2] = q_start, t_start, n_cigar.
extern "C" __global__ void __launch_bounds__(128)
pw_batch(const u8* __restrict__ qseq, const long long* __restrict__ qoff,
         const u8* __restrict__ tseq, const long long* __restrict__ toff,
         const int* __restrict__ order, int G, int2* bnd,
         int* __restrict__ score, int* __restrict__ qend, int* __restrict__ tend,
         unsigned* __restrict__ dirs, const long long* __restrict__ dir_off,
         unsigned* __restrict__ cig, const long long* __restrict__ cig_off, int* __restrict__ tb)
{
    const int gt = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = gt / LANES;
    const int lane = threadIdx.x & (LANES - 1);
    if (g >= G) return;
#if LANES == 32
    const unsigned gmask = 0xffffffffu;
#else
    const unsigned gmask = ((1u << LANES) - 1u) << ((threadIdx.x & 31) & ~(LANES - 1));
#endif
    const int p = order[g];
    const long long q0 = qoff[p], t0 = toff[p];
    const int m = (int)(qoff[p + 1] - q0), n = (int)(toff[p + 1] - t0);
    const u8* q = qseq + q0;
    const u8* t = tseq + t0;
    Best best;
    best_init(best, m, n);
    const int nstrips = (m + SR - 1) / SR;
    for (int s = 0; s < nstrips; ++s) {
        unsigned* dirw = nullptr;
#if TRACE
        dirw = dirs + dir_off[p] + (long long)s * (n + LANES - 1) * LANES;
#endif
        dp_strip<false>(q, m, t, n, s, lane, gmask, bnd, bnd, (long long)G, g, g,
                        nullptr, nullptr, best, dirw);
    }
    group_reduce(best, gmask);
#if TRACE
    __syncwarp(gmask);                           // direction words of all lanes visible to lane 0
#endif
    if (lane == 0) {
        score[p] = best.s; qend[p] = best.i; tend[p] = best.j;
#if TRACE
        int qs, ts;
        const int nc = walk(dirs + dir_off[p], n, best.i, best.j, cig + cig_off[p], &qs, &ts);
        tb[3 * p] = qs; tb[3 * p + 1] = ts; tb[3 * p + 2] = nc;
#endif
    }
}

// Forward pass of the gridded traceback (TRACE = 0): pw_batch plus grid checkpoints of pair p at
// rck + rck_off[p] ((ceil(m/BH) - 1) rows of n+1) and cck + cck_off[p] ((ceil(n/GW) - 1) columns of m).
extern "C" __global__ void __launch_bounds__(128)
pw_batch_ck(const u8* __restrict__ qseq, const long long* __restrict__ qoff,
            const u8* __restrict__ tseq, const long long* __restrict__ toff,
            const int* __restrict__ order, int G, int2* bnd,
            int* __restrict__ score, int* __restrict__ qend, int* __restrict__ tend,
            int2* rck, const long long* __restrict__ rck_off, int2* cck, const long long* __restrict__ cck_off,
            int BH, int GW)
{
#if TRACE == 0
    const int gt = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = gt / LANES;
    const int lane = threadIdx.x & (LANES - 1);
    if (g >= G) return;
#if LANES == 32
    const unsigned gmask = 0xffffffffu;
#else
    const unsigned gmask = ((1u << LANES) - 1u) << ((threadIdx.x & 31) & ~(LANES - 1));
#endif
    const int p = order[g];
    const long long q0 = qoff[p], t0 = toff[p];
    const int m = (int)(qoff[p + 1] - q0), n = (int)(toff[p + 1] - t0);
    Best best;
    best_init(best, m, n);
    const Ck ck{rck + rck_off[p], cck + cck_off[p], BH, GW, 0, 0};
    const int nstrips = (m + SR - 1) / SR;
    for (int s = 0; s < nstrips; ++s)
        dp_strip<false, true>(qseq + q0, m, tseq + t0, n, s, lane, gmask, bnd, bnd, (long long)G, g, g,
                              nullptr, nullptr, best, nullptr, ck);
    group_reduce(best, gmask);
    if (lane == 0) { score[p] = best.s; qend[p] = best.i; tend[p] = best.j; }
#endif
}

// pw_chain with grid checkpoints (one huge pair; rck: (ceil(m/BH)-1)*(n+1), cck: (ceil(n/GW)-1)*m).
extern "C" __global__ void __launch_bounds__(128)
pw_chain_ck(const u8* __restrict__ q, int m, const u8* __restrict__ t, int n,
            int2* ring, int* progress, int* __restrict__ cand, int2* rck, int2* cck, int BH, int GW)
{
#if LANES == 32 && TRACE == 0
    const int W = gridDim.x * (blockDim.x >> 5);
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    Best best;
    best_init(best, m, n);
    const Ck ck{rck, cck, BH, GW, 0, 0};
    const int nstrips = (m + SR - 1) / SR;
    for (int s = w; s < nstrips; s += W) {
        const long long sin = s > 0 ? (long long)((s - 1) % W) * (n + 1) : 0;
        const long long sout = (long long)(s % W) * (n + 1);
        dp_strip<true, true>(q, m, t, n, s, lane, 0xffffffffu, ring, ring, 1LL, sin, sout,
                             s > 0 ? (const volatile int*)&progress[s - 1] : nullptr,
                             (volatile int*)&progress[s], best, nullptr, ck);
    }
    group_reduce(best, 0xffffffffu);
    if (lane == 0) { cand[3 * w] = best.s; cand[3 * w + 1] = best.i; cand[3 * w + 2] = best.j; }
#endif
}

#if TRACE
// Gridded traceback (TRACE = 1 build): one group per pair walks back from (qend, tend); each grid
// block (BH rows x GW columns) the path enters is recomputed from the checkpoints (rows r0+1..i,
// columns c0+1..j; direction nibbles into this group's scratch, never a whole matrix) and walked
// by lane 0 exactly as `walk` does (same nibbles, same tie-breaking, run state kept across blocks).
//   sbnd: per group GW+1 int2; sdir: per group (BH/SR) * (GW + LANES - 1) * LANES words, or, when
//   sdir is null, the same in dynamic shared memory (blockDim.x / LANES groups per block).
extern "C" __global__ void __launch_bounds__(128)
pw_tb(const u8* __restrict__ qseq, const long long* __restrict__ qoff,
      const u8* __restrict__ tseq, const long long* __restrict__ toff,
      const int* __restrict__ order, int G, int BH, int GW,
      int2* rck, const long long* __restrict__ rck_off, int2* cck, const long long* __restrict__ cck_off,
      int2* sbnd, unsigned* sdir, const int* __restrict__ qend, const int* __restrict__ tend,
      unsigned* __restrict__ cigs, const long long* __restrict__ cig_off, int* __restrict__ tb)
{
    const int gt = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = gt / LANES;
    const int lane = threadIdx.x & (LANES - 1);
    if (g >= G) return;
#if LANES == 32
    const unsigned gmask = 0xffffffffu;
#else
    const unsigned gmask = ((1u << LANES) - 1u) << ((threadIdx.x & 31) & ~(LANES - 1));
#endif
    const int p = order[g];
    const long long q0 = qoff[p], t0 = toff[p];
    const int m = (int)(qoff[p + 1] - q0), n = (int)(toff[p + 1] - t0);
    const u8* q = qseq + q0;
    const u8* t = tseq + t0;
    int2* sb = sbnd + (long long)g * (GW + 1);
    extern __shared__ unsigned smem_dir[];
    const long long gwords = (long long)(BH / SR) * (GW + LANES - 1) * LANES;
    const bool shared_dir = sdir == nullptr;
    unsigned* sd = shared_dir ? smem_dir + (threadIdx.x / LANES) * gwords : sdir + (long long)g * gwords;
    int2* rk = rck + rck_off[p];
    int2* ckp = cck + cck_off[p];
    unsigned* cig = cigs + cig_off[p];
    int i = qend[p], j = tend[p], st = 0, nc = 0;
    unsigned cur_op = 0, cur_len = 0;
    Best dummy;
    for (;;) {
        int done = 0;
        if (lane == 0) {
#if MODE == 2
            if (i == 0 || j == 0) done = 1;
#else
            if (i == 0) {
#if MODE == 0
                if (j > 0) PUSH_OP(2u, (unsigned)j);
                j = 0;
#endif
                done = 1;
            } else if (j == 0) { PUSH_OP(1u, (unsigned)i); i = 0; done = 1; }
#endif
        }
        done = __shfl_sync(gmask, done, 0, LANES);
        if (done) break;
        const int r0 = (i - 1) / BH * BH, c0 = (j - 1) / GW * GW;
        const Ck ck{rk, ckp, BH, GW, c0, j};
        const int s0 = r0 / SR;
        for (int s = s0; s * SR < i; ++s) {
            const int2* bin = s == s0 ? rk + (long long)(r0 / BH - 1) * (n + 1) : sb - c0;
            dp_strip<false, false, true>(q, m, t, n, s, lane, gmask, bin, sb - c0, 1LL, 0, 0, nullptr, nullptr,
                                         dummy, sd + (long long)(s - s0) * (j - c0 + LANES - 1) * LANES, ck);
        }
        __syncwarp(gmask);
        int stop = 0;
        if (lane == 0) {
            const int ncol = j - c0;                // width of the recomputed block (its word stride)
            while (i > r0 && j > c0) {
                const unsigned nib = shared_dir ? dir_at<true>(sd, ncol, i - r0, j - c0)
                                                : dir_at<false>(sd, ncol, i - r0, j - c0);
                if (st == 0) {
                    const unsigned dd = nib & 3u;
                    if (dd == 3u) { stop = 1; break; }
                    if (dd == 0u) { PUSH_OP(0u, 1u); --i; --j; }
                    else st = (int)dd;
                } else if (st == 1) {
                    PUSH_OP(2u, 1u); --j; st = (nib & 4u) ? 1 : 0;
                } else {
                    PUSH_OP(1u, 1u); --i; st = (nib & 8u) ? 2 : 0;
                }
            }
        }
        stop = __shfl_sync(gmask, stop, 0, LANES);
        i = __shfl_sync(gmask, i, 0, LANES);
        j = __shfl_sync(gmask, j, 0, LANES);
        st = __shfl_sync(gmask, st, 0, LANES);
        __syncwarp(gmask);
        if (stop) break;
    }
    if (lane == 0) {
        if (cur_len) cig[nc++] = (cur_len << 4) | cur_op;
        for (int a = 0, b = nc - 1; a < b; ++a, --b) { const unsigned x = cig[a]; cig[a] = cig[b]; cig[b] = x; }
        tb[3 * p] = i; tb[3 * p + 1] = j; tb[3 * p + 2] = nc;
    }
}
#endif

// ---------------------------------------------------------------------------------------------
// 16-bit packed score path (score only, no band): one group aligns TWO pairs of equal query length
// m at once, pair A in the low and pair B in the high halfword of every 32-bit value (H, E, F,
// boundary words, shuffles).  Per 2 cells: PRMT (substitution scores of both pairs from per-row
// byte profiles, selected by the two target bases), 3 Hopper DPX ops (VIADDMNMX for E and F, kept
// biased by GO + GE, and VIADDMNMX[.RELU] for H = max(Hdiag + s, max(E, F)[, 0])), VIMNMX for
// max(E, F), VIADD for Hdiag + s, VIMNMX for the column max (local); column loop unrolled by two.  Target columns past a pair's own length are
// N-padded: such cells never beat a real cell (every value there derives from a real cell with a
// strict decrease), so only the end-cell extraction (global / semiglobal) masks by the pair's n.
// The launcher sends a pair here only when a bound computed from m, n and the scores shows that
// every DP value stays inside (NEG16, 32767] (aligner/pairwise/engine.py: fits16); otherwise the 32-bit
// kernel runs.  Same recurrences and tie-breaking as above, so results are identical.
#define NEG16 (-30000)

__device__ __forceinline__ unsigned pk1(int v) { return ((unsigned)v & 0xffffu) * 0x10001u; }
__device__ __forceinline__ int lo16(unsigned x) { return (int)(short)(x & 0xffffu); }
__device__ __forceinline__ int hi16(unsigned x) { return (int)x >> 16; }
__device__ __forceinline__ unsigned prmt_sx(unsigned a, unsigned b, unsigned sel) {
    unsigned r;                                  // default mode: selector bit 3 replicates the sign
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}
// byte k = s(query base c, target base k), k = 0..3 (signed bytes)
__device__ __forceinline__ unsigned prof_word(int c) {
    const unsigned w = ((unsigned)(c > 3 ? -1 : -MISMATCH) & 0xffu) * 0x01010101u;
    return c > 3 ? w : ((w & ~(0xffu << (8 * c))) | ((unsigned)(MATCH & 0xff) << (8 * c)));
}

// One column of R packed rows.  E and F are kept biased by GO + GE (X = E + GOE, Y = F + GOE), so
// that both updates are one VIADDMNMX against the unbiased H (X' = max(X - GE, H_left), Y' =
// max(Y - GE, H_up)) and no H - GO - GE row has to be stored; H = max(Hdiag + s, max(X, Y) - GOE
// [, 0]).  Values are exactly those of the unbiased recurrences.  Hin (column j-1) and Hout
// (column j) are different arrays: the column loop is unrolled by two and swaps them, so the
// diagonal / left values never have to be moved between registers.
template <bool HASN>
__device__ __forceinline__ void rows16(const unsigned (&pa)[R], const unsigned (&pb)[R], const unsigned (&Hin)[R],
                                       unsigned (&Hout)[R], unsigned (&X)[R], unsigned sel, unsigned tnm,
                                       unsigned h_d, unsigned& y, unsigned h_up, unsigned& cmax)
{
    const unsigned nge = pk1(-GE), ngoe = pk1(-GOE);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        unsigned sc = prmt_sx(pa[r], pb[r], sel);
        if (HASN) sc |= tnm;                     // -1 in the halves whose target base is N
        X[r] = __viaddmax_s16x2(X[r], nge, Hin[r]);
        y = __viaddmax_s16x2(y, nge, h_up);
        const unsigned hds = __vadd2(h_d, sc);
#if MODE == 2
        const unsigned h = __viaddmax_s16x2_relu(__vmaxs2(X[r], y), ngoe, hds);
        cmax = __vmaxs2(cmax, h);
#else
        const unsigned h = __viaddmax_s16x2(__vmaxs2(X[r], y), ngoe, hds);
#endif
        h_d = Hin[r];
        Hout[r] = h;
        h_up = h;
    }
}

__device__ __forceinline__ int row_of(const unsigned (&Hl)[R], int v, bool hi, int row0) {
    int bi = 0;                                  // smallest row of this lane holding v
#pragma unroll
    for (int r = R - 1; r >= 0; --r) if ((hi ? hi16(Hl[r]) : lo16(Hl[r])) == v) bi = row0 + r + 1;
    return bi;
}

// Global / semiglobal end cell of both packed pairs from row m of column j (the lane that owns row m,
// its register index rm): semiglobal keeps the best over j <= that pair's n, global takes j == n.
__device__ __forceinline__ void end_cell16(const unsigned (&Hout)[R], int rm, int m, int j, int na, int nb,
                                           Best& ba, Best& bb) {
    unsigned hm = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) if (r == rm) hm = Hout[r];
#if MODE == 1
    if (j <= na && lo16(hm) > ba.s) { ba.s = lo16(hm); ba.i = m; ba.j = j; }
    if (j <= nb && hi16(hm) > bb.s) { bb.s = hi16(hm); bb.i = m; bb.j = j; }
#else
    if (j == na) { ba.s = lo16(hm); ba.i = m; ba.j = na; }
    if (j == nb) { bb.s = hi16(hm); bb.i = m; bb.j = nb; }
#endif
}

// One column step of dp_strip16 (column j = tt - lane + 1), reading H of column j-1 from Hin and
// writing column j to Hout.
struct St16 {
    unsigned hdiag, up_h, up_f, bh, bf, cur_h, cur_f, nx_h, nx_f;
    int cnext;                                   // CK: next grid column of this lane
};

// Grid checkpoints of the 16-bit forward pass (pw_batch16_ck), unpacked into the 32-bit layout of
// `Ck` per pair (A: low halves, B: high halves; B pointers null when the group has no pair B):
// rowA / rowB: this strip's bottom row when it is a grid row (else null), H and F = Y - GOE;
// colA / colB: the pair's cck, H and E = X - GOE of every GW-th column (j < n of that pair).
struct Ck16 {
    int2* rowA; int2* rowB; int2* colA; int2* colB; int GW;
};

// H and E = X - GOE of this lane's rows (pair A: low halves, B: high) into a column checkpoint.
__device__ __forceinline__ void put_col16(int2* cc, int m, int row0, const unsigned (&Hout)[R], const unsigned (&X)[R],
                                          bool hi) {
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (row0 + r < m)
            cc[row0 + r] = hi ? make_int2(hi16(Hout[r]), hi16(X[r]) - GOE) : make_int2(lo16(Hout[r]), lo16(X[r]) - GOE);
}

template <bool CK>
__device__ __forceinline__ void step16(
    const u8* __restrict__ ta, int na, const u8* __restrict__ tb, int nb, int n, int s, int lane,
    unsigned gmask, const uint2* bin, uint2* bout, long long bjs, long long slot, bool last_strip, bool owns_m,
    int rm, int m, int row0, int tt, const unsigned (&pa)[R], const unsigned (&pb)[R], const unsigned (&Hin)[R],
    unsigned (&Hout)[R], unsigned (&X)[R], St16& q, Best& ba, Best& bb, const Ck16& ck)
{
    const int j = tt - lane + 1;
    const bool active = j >= 1 && j <= n;
    if (s > 0) {
        const int k = tt % LANES;
        if (k == 0) {
            q.cur_h = q.nx_h; q.cur_f = q.nx_f;
            const int jn = tt + LANES + 1 + lane;
            if (jn <= n) {
                const uint2 v = __ldcg(&bin[(long long)jn * bjs + slot]);
                q.nx_h = v.x; q.nx_f = v.y;
            }
        }
#if LANES > 1
        const unsigned vh = __shfl_sync(gmask, q.cur_h, k, LANES);
        const unsigned vf = __shfl_sync(gmask, q.cur_f, k, LANES);
#else
        const unsigned vh = q.cur_h, vf = q.cur_f;
#endif
        if (lane == 0 && active) { q.up_h = vh; q.up_f = vf; }
    } else if (lane == 0 && active) {
        q.up_h = pk1(rowinit(j)); q.up_f = pk1(NEG16);
    }
    if (active) {
        const int a = j <= na ? (int)ta[j - 1] : 4;
        const int b = j <= nb ? (int)tb[j - 1] : 4;
        const bool an = a > 3, bn = b > 3;
        const unsigned sel = (unsigned)(an ? 0 : a) * 0x11u + (unsigned)(bn ? 0 : b) * 0x1100u + 0xC480u;
        const unsigned tnm = (an ? 0xffffu : 0u) | (bn ? 0xffff0000u : 0u);
        const unsigned h_d = q.hdiag;
        q.hdiag = q.up_h;
        unsigned y = q.up_f;
        unsigned cmax = 0;
        if (tnm == 0u) rows16<false>(pa, pb, Hin, Hout, X, sel, tnm, h_d, y, q.up_h, cmax);
        else rows16<true>(pa, pb, Hin, Hout, X, sel, tnm, h_d, y, q.up_h, cmax);
        q.bh = Hout[R - 1]; q.bf = y;
        if (lane == LANES - 1 && !last_strip) bout[(long long)j * bjs + slot] = make_uint2(q.bh, q.bf);
        if (CK) {
            if (lane == LANES - 1 && ck.rowA) {
                if (j <= na) ck.rowA[j] = make_int2(lo16(q.bh), lo16(q.bf) - GOE);
                if (ck.rowB && j <= nb) ck.rowB[j] = make_int2(hi16(q.bh), hi16(q.bf) - GOE);
            }
            if (j == q.cnext) {
                if (j < na) put_col16(ck.colA + (long long)(j / ck.GW - 1) * m, m, row0, Hout, X, false);
                if (ck.colB && j < nb) put_col16(ck.colB + (long long)(j / ck.GW - 1) * m, m, row0, Hout, X, true);
                q.cnext += ck.GW;
            }
        }
#if MODE == 2
        const int ca = lo16(cmax), cb = hi16(cmax);
        if (ca > ba.s || (ca == ba.s && j < ba.j)) { ba.s = ca; ba.i = row_of(Hout, ca, false, row0); ba.j = j; }
        if (cb > bb.s || (cb == bb.s && j < bb.j)) { bb.s = cb; bb.i = row_of(Hout, cb, true, row0); bb.j = j; }
#else
        if (owns_m) end_cell16(Hout, rm, m, j, na, nb, ba, bb);
#endif
    }
#if LANES > 1
    else {
#pragma unroll
        for (int r = 0; r < R; ++r) Hout[r] = Hin[r];    // idle step: carry the column over
    }
#endif
#if LANES > 1
    const unsigned nh = __shfl_up_sync(gmask, q.bh, 1, LANES);
    const unsigned nf = __shfl_up_sync(gmask, q.bf, 1, LANES);
    if (lane > 0) { q.up_h = nh; q.up_f = nf; }
#endif
}

template <bool CK = false>
__device__ __forceinline__ void dp_strip16(
    const u8* __restrict__ qa, const u8* __restrict__ qb, int m, const u8* __restrict__ ta, int na,
    const u8* __restrict__ tb, int nb, int s, int lane, unsigned gmask,
    const uint2* bin, uint2* bout, long long bjs, long long slot, Best& ba, Best& bb,
    const Ck16& ck = Ck16{nullptr, nullptr, nullptr, nullptr, 1})
{
    const int n = max(na, nb);
    const int row0 = s * SR + lane * R;
    const bool last_strip = (s + 1) * SR >= m;
    unsigned pa[R], pb[R], HA[R], HB[R], X[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int idx = row0 + r;
        pa[r] = prof_word(idx < m ? (int)qa[idx] : 4);
        pb[r] = prof_word(idx < m ? (int)qb[idx] : 4);
        HA[r] = pk1(colinit(idx + 1));
        X[r] = pk1(NEG16);
    }
    const int rm = m - 1 - row0;
    const bool owns_m = last_strip && rm >= 0 && rm < R;
    St16 q;
    q.hdiag = pk1(colinit(row0));
    q.up_h = 0; q.up_f = pk1(NEG16); q.bh = 0; q.bf = pk1(NEG16);
    q.cur_h = 0; q.cur_f = 0; q.nx_h = 0; q.nx_f = 0;
    q.cnext = CK ? ck.GW : 0x7fffffff;
    if (s > 0 && 1 + lane <= n) {
        const uint2 v = __ldcg(&bin[(long long)(1 + lane) * bjs + slot]);
        q.nx_h = v.x; q.nx_f = v.y;
    }
    const int nsteps = n + LANES - 1;
    int tt = 0;
    for (; tt + 1 < nsteps; tt += 2) {
        step16<CK>(ta, na, tb, nb, n, s, lane, gmask, bin, bout, bjs, slot, last_strip, owns_m, rm, m, row0, tt,
                   pa, pb, HA, HB, X, q, ba, bb, ck);
        step16<CK>(ta, na, tb, nb, n, s, lane, gmask, bin, bout, bjs, slot, last_strip, owns_m, rm, m, row0, tt + 1,
                   pa, pb, HB, HA, X, q, ba, bb, ck);
    }
    if (tt < nsteps)
        step16<CK>(ta, na, tb, nb, n, s, lane, gmask, bin, bout, bjs, slot, last_strip, owns_m, rm, m, row0, tt,
                   pa, pb, HA, HB, X, q, ba, bb, ck);
}

// Body of pw_batch16 / pw_batch16_ck (CK: also the grid checkpoints, see pw_batch16_ck).
template <bool CK>
__device__ __forceinline__ void batch16(
    const u8* __restrict__ qseq, const long long* __restrict__ qoff, const u8* __restrict__ tseq,
    const long long* __restrict__ toff, const int* __restrict__ order2, int G, uint2* bnd,
    int* __restrict__ score, int* __restrict__ qend, int* __restrict__ tend,
    int2* rck, const long long* __restrict__ rck_off, int2* cck, const long long* __restrict__ cck_off, int BH, int GW)
{
    const int gt = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = gt / LANES;
    const int lane = threadIdx.x & (LANES - 1);
    if (g >= G) return;
#if LANES == 32
    const unsigned gmask = 0xffffffffu;
#else
    const unsigned gmask = ((1u << LANES) - 1u) << ((threadIdx.x & 31) & ~(LANES - 1));
#endif
    const int pa = order2[2 * g], pb0 = order2[2 * g + 1];
    const int pb = pb0 < 0 ? pa : pb0;
    const int m = (int)(qoff[pa + 1] - qoff[pa]);
    const int na = (int)(toff[pa + 1] - toff[pa]), nb = (int)(toff[pb + 1] - toff[pb]);
    const u8* qa = qseq + qoff[pa];
    const u8* qb = qseq + qoff[pb];
    const u8* ta = tseq + toff[pa];
    const u8* tb = tseq + toff[pb];
    Best ba, bb;
    best_init(ba, m, na);
    best_init(bb, m, nb);
    const int nstrips = (m + SR - 1) / SR;
    for (int s = 0; s < nstrips; ++s) {
        Ck16 ck{nullptr, nullptr, nullptr, nullptr, 1};
        if (CK) {
            ck = Ck16{nullptr, nullptr, cck + cck_off[pa], pb0 >= 0 ? cck + cck_off[pb0] : nullptr, GW};
            if (s + 1 < nstrips && ((s + 1) * SR) % BH == 0) {
                const long long k = (s + 1) * SR / BH - 1;
                ck.rowA = rck + rck_off[pa] + k * (na + 1);
                ck.rowB = pb0 >= 0 ? rck + rck_off[pb0] + k * (nb + 1) : nullptr;
            }
        }
        dp_strip16<CK>(qa, qb, m, ta, na, tb, nb, s, lane, gmask, bnd, bnd, (long long)G, g, ba, bb, ck);
    }
    group_reduce(ba, gmask);
    group_reduce(bb, gmask);
    if (lane == 0) {
        score[pa] = ba.s; qend[pa] = ba.i; tend[pa] = ba.j;
        if (pb0 >= 0) { score[pb0] = bb.s; qend[pb0] = bb.i; tend[pb0] = bb.j; }
    }
}

// Pairs two by two: pairs order2[2g] (A) and order2[2g+1] (B, or -1: none) share group g and have
// equal query lengths.  bnd: (max n + 1) * G uint2 scratch.  Score only.
extern "C" __global__ void __launch_bounds__(128)
pw_batch16(const u8* __restrict__ qseq, const long long* __restrict__ qoff,
           const u8* __restrict__ tseq, const long long* __restrict__ toff,
           const int* __restrict__ order2, int G, uint2* bnd,
           int* __restrict__ score, int* __restrict__ qend, int* __restrict__ tend)
{
    batch16<false>(qseq, qoff, tseq, toff, order2, G, bnd, score, qend, tend, nullptr, nullptr, nullptr, nullptr, 1, 1);
}

// Forward pass of the gridded traceback in 16 bits: pw_batch16 plus the grid checkpoints of both
// pairs of a group, unpacked to the 32-bit layout of pw_batch_ck (rck + rck_off[p]: (ceil(m/BH) - 1)
// rows of n+1 int2; cck + cck_off[p]: (ceil(n/GW) - 1) columns of m int2), so that pw_tb (32-bit)
// recomputes the blocks unchanged.  Values are exact (fits16 holds for every pair sent here), so the
// checkpoints equal pw_batch_ck's wherever pw_tb reads them.  BH: a multiple of SR.
extern "C" __global__ void __launch_bounds__(128)
pw_batch16_ck(const u8* __restrict__ qseq, const long long* __restrict__ qoff,
              const u8* __restrict__ tseq, const long long* __restrict__ toff,
              const int* __restrict__ order2, int G, uint2* bnd,
              int* __restrict__ score, int* __restrict__ qend, int* __restrict__ tend,
              int2* rck, const long long* __restrict__ rck_off, int2* cck, const long long* __restrict__ cck_off,
              int BH, int GW)
{
    batch16<true>(qseq, qoff, tseq, toff, order2, G, bnd, score, qend, tend, rck, rck_off, cck, cck_off, BH, GW);
}

// ---------------------------------------------------------------------------------------------
// 16-bit traceback of short pairs in shared memory (pw_tb16): one warp (LANES = 32, R rows per
// lane, one strip: m <= 32*R) aligns TWO pairs of equal query length, packed in the halfwords as
// in pw_batch16, and keeps the direction bits of both whole matrices in shared memory, never in
// global memory: one byte per packed cell (pair A in the low, pair B in the high nibble) at
// sdir[(j-1)*SR + i-1], n*SR bytes per warp (150 x 150: 24 KB), followed by one word per target
// column (PRMT selector of the two target bases in the low half, base codes of A / B in bytes 2 / 3),
// built once by the whole warp so that the column loop reads no global memory.  Nibble bits:
//   bit0 not M (Hdiag + s < max(E, F))     bit1 I over D (E < F)
//   bit2 E extends (E(i,j-1) - GE > H(i,j-1) - GO - GE)   bit3 F extends (same, F)
// i.e. exactly the tie-breaking rule of the header.  As in pw_batch16, E and F are kept biased by
// GO + GE (X = E + GOE, Y = F + GOE: X' = max(X - GE, H_left), one VIADDMNMX) and the column loop is
// unrolled by two over two H arrays (column j-1 / column j, swapped), so nothing is copied; H =
// max(Y' - GOE, U) with U = max(X' - GOE, Hdiag + s) computed off the row-to-row dependency chain.
// The bits are the signs of Hdiag + s - H, X' - Y', H_left - X', H_up - Y' (all fit int16:
// |values| < TB16_LIM), replicated into 0x00 / 0xFF bytes by two PRMT and folded by two signed
// IDP.4A with weights -1, -2, -4, ... (bit k of the byte).  The local-mode stop (H == 0) needs no
// bit: the walk tracks the exact H / E / F value of every cell on the path from the best score
// downwards (M: H(i-1,j-1) = H - s; gap extension: + GE; gap open: + GO + GE) and stops where
// H == 0 in state H.  Local mode's best cell is tracked without a per-column row search: each row
// folds the key H * 8 + 7 - r into the column maximum (so the largest key is the best H at its
// smallest row), and one packed compare per column keeps the key and its j in both halves when the
// score part grows strictly (ties keep the smaller j); this needs H < 4096 (fits_tb16, local).
// After the forward pass the column words get the query codes in bytes 0 / 1 (the walk's
// substitution scores come from shared memory; words up to max(n, m)), then lane 0 walks pair A
// and lane 1 pair B in lockstep (walk16); CIGARs, starts and ends are those of `walk` / the CPU twin.
#if TRACE && LANES == 32
template <bool HASN>
__device__ __forceinline__ void rows16tb(const unsigned (&pa)[R], const unsigned (&pb)[R], const unsigned (&Hin)[R],
                                         unsigned (&Hout)[R], unsigned (&X)[R], unsigned sel, unsigned tnm,
                                         unsigned h_d, unsigned& y, unsigned h_up, unsigned& cmax, u8* dcol)
{
    const unsigned nge = pk1(-GE), ngoe = pk1(-GOE);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        unsigned sc = prmt_sx(pa[r], pb[r], sel);
        if (HASN) sc |= tnm;                     // -1 in the halves whose target base is N
        const unsigned hl = Hin[r];
        const unsigned x = __viaddmax_s16x2(X[r], nge, hl);
        const unsigned hd = __vadd2(h_d, sc);
        const unsigned u = __viaddmax_s16x2(x, ngoe, hd);
        const unsigned yy = __viaddmax_s16x2(y, nge, h_up);
#if MODE == 2
        const unsigned h = __viaddmax_s16x2_relu(yy, ngoe, u);
        cmax = __vmaxs2(cmax, h * 8u + (unsigned)(7 - r) * 0x10001u);   // key: H * 8 + 7 - r (H >= 0)
#else
        const unsigned h = __viaddmax_s16x2(yy, ngoe, u);
#endif
        const unsigned p1 = prmt_sx(__vsub2(hd, h), __vsub2(x, yy), 0xFBD9u);
        const unsigned p2 = prmt_sx(__vsub2(hl, x), __vsub2(h_up, yy), 0xFBD9u);
        dcol[r] = (u8)__dp4a((int)p1, (int)0xE0F0FEFFu, __dp4a((int)p2, (int)0x80C0F8FCu, 0));
        X[r] = x;
        y = yy;
        h_d = hl;
        Hout[r] = h;
        h_up = h;
    }
}

// One column step of pw_tb16 (column j = tt - lane + 1): H of column j-1 in Hin, column j to Hout.
struct StTb {
    unsigned hdiag, up_h, up_f, bh, bf, info;
    unsigned bk, bj;                             // local: best key H * 8 + 7 - r and its column, packed A / B
};

__device__ __forceinline__ void step_tb16(
    int tt, int lane, int n, int na, int nb, int m, int row0, int rm, bool owns_m, const unsigned* sinfo,
    u8* sdir, const unsigned (&pa)[R], const unsigned (&pb)[R], const unsigned (&Hin)[R], unsigned (&Hout)[R],
    unsigned (&X)[R], StTb& q, Best& ba, Best& bb)
{
    const int j = tt - lane + 1;
    const bool active = j >= 1 && j <= n;
    const unsigned info = q.info;
    q.info = sinfo[min(max(j, 0), n - 1)];       // column j + 1, for the next step
    (void)owns_m; (void)rm; (void)m; (void)na; (void)nb;
    if (lane == 0 && active) { q.up_h = pk1(rowinit(j)); q.up_f = pk1(NEG16); }
    if (active) {
        const unsigned h_d = q.hdiag;
        q.hdiag = q.up_h;
        unsigned y = q.up_f;
        unsigned cmax = 0;
        u8* dcol = sdir + (j - 1) * SR + row0;
        if (!(info & 0x04040000u)) {
            rows16tb<false>(pa, pb, Hin, Hout, X, info, 0u, h_d, y, q.up_h, cmax, dcol);
        } else {
            const unsigned tnm = ((info & 0x00040000u) ? 0xffffu : 0u) | ((info & 0x04000000u) ? 0xffff0000u : 0u);
            rows16tb<true>(pa, pb, Hin, Hout, X, info, tnm, h_d, y, q.up_h, cmax, dcol);
        }
        q.bh = Hout[R - 1]; q.bf = y;
#if MODE == 2
        // A half improves iff its column key's score beats the best score (key >> 3 strictly greater,
        // i.e. (cmax & ~7) > (bk | 7)); j grows, so ties keep the smaller j, and the key's row part
        // picks the smallest row of the column.  Branch-free: sign of the difference as a half mask.
        const unsigned dk = __vsub2(q.bk | 0x00070007u, cmax & 0xfff8fff8u);
        const unsigned msk = prmt_sx(dk, dk, 0xBB99u);
        q.bk = (cmax & msk) | (q.bk & ~msk);
        q.bj = ((unsigned)j * 0x10001u & msk) | (q.bj & ~msk);
#else
        if (owns_m) end_cell16(Hout, rm, m, j, na, nb, ba, bb);
#endif
    }
    const unsigned nh = __shfl_up_sync(0xffffffffu, q.bh, 1);
    const unsigned nf = __shfl_up_sync(0xffffffffu, q.bf, 1);
    if (lane > 0) { q.up_h = nh; q.up_f = nf; }
}

// Walk of one pair (shift 0: pair A, 4: pair B) from (i, j) with H(i, j) = v; CIGAR in forward order.
// Same moves and tie-breaking as `walk`, written without branches inside a step so that lanes 0 and 1
// (pairs A and B) run every step in lockstep instead of serialising on divergent paths: per step one
// shared load of the cell's nibble (and, local mode, of the two code words of its query row and
// target column: cw[k] = query codes of A / B in bytes 0 / 1, target codes in bytes 2 / 3), then
//   s2  = the move: state E / F keep theirs; state H: M unless bit0, then D (E) or I (F) by bit1,
//   nst = s2 if its extension bit (bit2 for E, bit3 for F) is set, else H,
// i -= (s2 != E), j -= (s2 != F), and the run-length CIGAR append as a predicated store.  Local
// mode tracks H on the path (M: H(i-1,j-1) = H - s; gap extension + GE, gap open + GO + GE) and
// stops in state H where H == 0.
__device__ int walk16(const u8* sd, int sh, const unsigned* cw, int lane, int i, int j, int v, unsigned* cig,
                      int* qs, int* ts) {
    int nc = 0; unsigned cur_op = 0, cur_len = 0, st = 0;           // st: 0 H, 1 E (D), 2 F (I)
    (void)cw; (void)lane; (void)v;
#if MODE == 2
    const unsigned psel = (unsigned)lane | ((unsigned)(6 + lane) << 4);  // PRMT: query code, target code
#endif
    for (;;) {
#if MODE == 2
        if ((i == 0) | (j == 0) | ((st == 0u) & (v == 0))) break;
#else
        if ((i == 0) | (j == 0)) break;
#endif
        const unsigned nib = ((unsigned)sd[(j - 1) * SR + i - 1] >> sh) & 15u;
#if MODE == 2
        const unsigned qt = __byte_perm(cw[i - 1], cw[j - 1], psel);    // byte 0 query, byte 1 target
#endif
        const unsigned s2 = st ? st : ((0x84u >> ((nib & 3u) << 1)) & 3u);
        const unsigned nst = ((nib >> (s2 + 1u)) & 1u) ? s2 : 0u;
        const unsigned op = (0x18u >> (s2 << 1)) & 3u;
        const bool same = op == cur_op;
        if (!same && cur_len) cig[nc] = (cur_len << 4) | cur_op;
        nc += (!same && cur_len) ? 1 : 0;
        cur_len = same ? cur_len + 1u : 1u;
        cur_op = op;
#if MODE == 2
        const unsigned qc = qt & 0xffu, tc = (qt >> 8) & 0xffu;
        const int sub = ((qc | tc) & 4u) ? -1 : (qc == tc ? MATCH : -MISMATCH);
        v += s2 == 0u ? -sub : (nst ? GE : GOE);
#endif
        i -= s2 != 1u;
        j -= s2 != 2u;
        st = nst;
    }
#if MODE != 2
    if (i == 0) {
#if MODE == 0
        if (j > 0) PUSH_OP(2u, (unsigned)j);
        j = 0;
#endif
    } else { PUSH_OP(1u, (unsigned)i); i = 0; }
#endif
    if (cur_len) cig[nc++] = (cur_len << 4) | cur_op;
    for (int a = 0, b = nc - 1; a < b; ++a, --b) { const unsigned x = cig[a]; cig[a] = cig[b]; cig[b] = x; }
    *qs = i; *ts = j;
    return nc;
}
#endif

// Pairs two by two as in pw_batch16 (order2), one warp per group, blockDim.x = 32, dynamic shared
// memory >= max n * SR + 4 * max(max n, m) bytes; requires m <= SR.  Outputs as pw_batch with TRACE.
extern "C" __global__ void __launch_bounds__(32)
pw_tb16(const u8* __restrict__ qseq, const long long* __restrict__ qoff,
        const u8* __restrict__ tseq, const long long* __restrict__ toff,
        const int* __restrict__ order2, int G,
        int* __restrict__ score, int* __restrict__ qend, int* __restrict__ tend,
        unsigned* __restrict__ cigs, const long long* __restrict__ cig_off, int* __restrict__ tbo,
        long long* __restrict__ prof)
{
#if TRACE && LANES == 32
    extern __shared__ u8 sdir[];
#if TBPROF
    const long long c_start = clock64();
#else
    (void)prof;
#endif
    const int g = blockIdx.x;
    const int lane = threadIdx.x & 31;
    if (g >= G) return;
    const unsigned gmask = 0xffffffffu;
    const int pA = order2[2 * g], pB0 = order2[2 * g + 1];
    const int pB = pB0 < 0 ? pA : pB0;
    const int m = (int)(qoff[pA + 1] - qoff[pA]);
    const int na = (int)(toff[pA + 1] - toff[pA]), nb = (int)(toff[pB + 1] - toff[pB]);
    const u8* qa = qseq + qoff[pA];
    const u8* qb = qseq + qoff[pB];
    const u8* ta = tseq + toff[pA];
    const u8* tb = tseq + toff[pB];
    const int n = max(na, nb);
    unsigned* sinfo = (unsigned*)(sdir + n * SR);            // n * SR is a multiple of 32
#pragma unroll 4
    for (int jj = lane; jj < n; jj += 32) {
        const unsigned a = jj < na ? (unsigned)ta[jj] : 4u;
        const unsigned b = jj < nb ? (unsigned)tb[jj] : 4u;
        const unsigned sa = a > 3 ? 0u : a, sb = b > 3 ? 0u : b;
        sinfo[jj] = sa * 0x11u + sb * 0x1100u + 0xC480u + (a << 16) + (b << 24);
    }
    Best ba, bb;
    best_init(ba, m, na);
    best_init(bb, m, nb);
    const int row0 = lane * R;
    unsigned pa[R], pb[R], HA[R], HB[R], X[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int idx = row0 + r;
        pa[r] = prof_word(idx < m ? (int)qa[idx] : 4);
        pb[r] = prof_word(idx < m ? (int)qb[idx] : 4);
        HA[r] = pk1(colinit(idx + 1));
        HB[r] = HA[r];                           // both: a lane's first column may read either
        X[r] = pk1(NEG16);
    }
    const int rm = m - 1 - row0;
    const bool owns_m = rm >= 0 && rm < R;
    __syncwarp(gmask);                           // sinfo visible
    StTb q;
    q.hdiag = pk1(colinit(row0));
    q.up_h = 0; q.up_f = pk1(NEG16); q.bh = 0; q.bf = pk1(NEG16);
    q.info = sinfo[min(max(-lane, 0), n - 1)];   // column 1 - lane
    q.bk = 0; q.bj = 0;
    const int nsteps = n + 31;
    int tt = 0;
    for (; tt + 1 < nsteps; tt += 2) {
        step_tb16(tt, lane, n, na, nb, m, row0, rm, owns_m, sinfo, sdir, pa, pb, HA, HB, X, q, ba, bb);
        step_tb16(tt + 1, lane, n, na, nb, m, row0, rm, owns_m, sinfo, sdir, pa, pb, HB, HA, X, q, ba, bb);
    }
    if (tt < nsteps)
        step_tb16(tt, lane, n, na, nb, m, row0, rm, owns_m, sinfo, sdir, pa, pb, HA, HB, X, q, ba, bb);
#if MODE == 2
    if (lo16(q.bk) >= 8) { ba.s = lo16(q.bk) >> 3; ba.i = row0 + 8 - (lo16(q.bk) & 7); ba.j = lo16(q.bj); }
    if (hi16(q.bk) >= 8) { bb.s = hi16(q.bk) >> 3; bb.i = row0 + 8 - (hi16(q.bk) & 7); bb.j = hi16(q.bj); }
#endif
    group_reduce(ba, gmask);
    group_reduce(bb, gmask);
#if MODE == 2
    __syncwarp(gmask);                           // the forward pass has read its last column word
    for (int k = lane; k < m; k += 32) {         // query codes into bytes 0 / 1 of the column words
        ((u8*)sinfo)[4 * k] = qa[k];
        ((u8*)sinfo)[4 * k + 1] = qb[k];
    }
#endif
    __syncwarp(gmask);                           // direction bytes of all lanes visible
#if TBPROF
    const long long c_fwd = clock64();
#endif
    if (lane < 2 && (lane == 0 || pB0 >= 0)) {
        const Best bs = lane == 0 ? ba : bb;
        const int p = lane == 0 ? pA : pB0;
        score[p] = bs.s; qend[p] = bs.i; tend[p] = bs.j;
        int qs, ts;
        const int nc = walk16(sdir, 4 * lane, sinfo, lane, bs.i, bs.j, bs.s, cigs + cig_off[p], &qs, &ts);
        tbo[3 * p] = qs; tbo[3 * p + 1] = ts; tbo[3 * p + 2] = nc;
    }
#if TBPROF
    __syncwarp(gmask);
    if (lane == 0) {                             // cycles of the forward pass and of the walk
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        prof[3 * g] = c_fwd - c_start; prof[3 * g + 1] = clock64() - c_fwd; prof[3 * g + 2] = smid;
    }
#endif
#endif
}

// One pair, W = gridDim.x * blockDim.x / 32 warps, LANES must be 32.  ring: W * (n+1) int2,
// progress: nstrips ints (zeroed), cand: 3*W ints (best score, i, j of each warp).
extern "C" __global__ void __launch_bounds__(128)
pw_chain(const u8* __restrict__ q, int m, const u8* __restrict__ t, int n,
         int2* ring, int* progress, int* __restrict__ cand)
{
#if LANES == 32 && TRACE == 0
    const int W = gridDim.x * (blockDim.x >> 5);
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    Best best;
    best_init(best, m, n);
    const int nstrips = (m + SR - 1) / SR;
    for (int s = w; s < nstrips; s += W) {
        const long long sin = s > 0 ? (long long)((s - 1) % W) * (n + 1) : 0;
        const long long sout = (long long)(s % W) * (n + 1);
        dp_strip<true>(q, m, t, n, s, lane, 0xffffffffu, ring, ring, 1LL, sin, sout,
                       s > 0 ? (const volatile int*)&progress[s - 1] : nullptr,
                       (volatile int*)&progress[s], best, nullptr);
    }
    group_reduce(best, 0xffffffffu);
    if (lane == 0) { cand[3 * w] = best.s; cand[3 * w + 1] = best.i; cand[3 * w + 2] = best.j; }
#endif
}

// ---------------------------------------------------------------------------------------------
// Long pairs over the whole GPU (regime 2, score only, LANES = 32): pw_chain for a batch of pairs.
// Work items are (pair, strip); W persistent warps, warp w runs items w, w+W, w+2W, ... in
// increasing order, each one dp_strip<true> as in pw_chain.  items[k] = (pair a, strip s, prev,
// next): prev = the item of strip s-1 of pair a (< k; -1 for s = 0), next = the item of strip s+1
// (-1 for the last strip), built by the launcher (aligner/pairwise/engine.py: chain_items).  The launcher
// interleaves a group of pairs strip by strip (all pairs' strip 0, then strip 1, ...) so that
// several pairs fill the pipeline at once; pair-major order (prev = k-1) is the group size 1.
// Item k writes its bottom row to ring slot k % W (`slot` int2 per slot: max n + 1 of the launch)
// and publishes it through progress[k] (one int per item, zeroed) as pw_chain does; when the item
// has finished (every lane's reads of the slot above included) lane 0 sets progress[k] = CB_DONE.
// Ring reuse: slot k % W holds the row of the warp's last item k' < k that wrote one (last strips
// write none), for its reader r = next[k'] (r <= k' + group <= k: the launcher keeps group <= W).
// If r belongs to pair a, k depends on r through its chain of predecessors (a strip publishes column
// j only after its predecessor published j, and after it has read column j of the row above), so no
// write of k overtakes a read of r, as in pw_chain.  Otherwise k waits for progress[r] == CB_DONE
// before its strip starts (r == k: the strip reads and writes the same slot, reads ahead of writes,
// as pw_batch).
// Deadlock freedom: every wait of item k is on an item of smaller index (prev, r != k, and the
// warp's own earlier items), and all W warps are co-resident (the launcher sizes the grid with the
// occupancy calculator).  So the smallest unfinished item runs (its warp has finished its earlier,
// smaller items), everything it waits for is smaller and thus finished, and it finishes; by
// induction every item does.
// cand[3k..3k+2]: best (score, i, j) of item k's strip, from best_init of its pair; the host reduces
// per pair with the tie order score desc, j asc, i asc (as for pw_chain).
//   pinfo: per pair (q offset, t offset, m, n); items: K int4 rows; ring: W * slot int2.
#define CB_DONE 0x7fffffff

extern "C" __global__ void __launch_bounds__(128)
pw_chain_batch(const u8* __restrict__ qseq, const u8* __restrict__ tseq, const long long* __restrict__ pinfo,
               const int4* __restrict__ items, int K, int2* ring, long long slot, int* progress,
               int* __restrict__ cand)
{
#if LANES == 32 && TRACE == 0
    const int W = gridDim.x * (blockDim.x >> 5);
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    volatile int* vprog = progress;
    int r = -1;                                  // reader of the row in this warp's slot (-1: none)
    for (int k = w; k < K; k += W) {
        const int4 it = items[k];
        const long long q0 = pinfo[4 * it.x], t0 = pinfo[4 * it.x + 1];
        const int m = (int)pinfo[4 * it.x + 2], n = (int)pinfo[4 * it.x + 3];
        if ((it.y + 1) * SR < m) {               // this strip writes slot k % W
            if (r >= 0 && r != k && items[r].x != it.x) {
                if (lane == 0) { while (vprog[r] != CB_DONE) { } __threadfence(); }
                __syncwarp();
            }
            r = it.w;
        }
        Best best;
        best_init(best, m, n);
        dp_strip<true>(qseq + q0, m, tseq + t0, n, it.y, lane, 0xffffffffu, ring, ring, 1LL,
                       it.z >= 0 ? (long long)(it.z % W) * slot : 0, (long long)(k % W) * slot,
                       it.z >= 0 ? (const volatile int*)&progress[it.z] : nullptr, vprog + k, best, nullptr);
        group_reduce(best, 0xffffffffu);
        __syncwarp();
        if (lane == 0) {
            cand[3 * k] = best.s; cand[3 * k + 1] = best.i; cand[3 * k + 2] = best.j;
            __threadfence();
            vprog[k] = CB_DONE;
        }
    }
#endif
}
