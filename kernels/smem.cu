// GPU seeding: bwa mem's mem_collect_intv() by backward-only double-step SMEM search, and seed
// positions (sampled SA rows -> text positions) -- exact ports of aligner/mem/smem.py, aligner/mem/ksort.py,
// aligner/mem/chain.py:make_seeds and index/fm.py's queries. Outputs equal the CPU twins bit for bit.
//
// Thread mapping
//   collect_intv_kernel: one thread per read (simple first version; warps diverge freely). Each thread
//     keeps its intervals in a private slot of `cap` records in global scratch, laid out interleaved
//     (record j of thread t at j*nthreads + t, like local memory) so that lock-step writes coalesce;
//     records are sorted in place by bwa's introsort (ksort.h, same element moves as aligner/mem/ksort.py)
//     and the count is written to n_out[t] (-1 = the slot overflowed: the host re-runs that read with a
//     larger slot). No shared memory beyond the 29 index parameters.
//   compact_kernel: one thread per read, copies its sorted slot into the CSR output (b, e, k, s).
//   seed_pos_kernel: one thread per seed occurrence: row = mk + j*step (bwa's even sampling), fm_sa by
//     LF walking to a sampled row, then bwa's bns_intv2rid.
//
// Index layout (index/fm.py), uint32 words: blocks of 64 rows; block b at occ[b*24 ...]: 16 counts of
// the rows' 4-bit pair codes (rows < 64b), then 4 code words of 16 nibbles (two uint32 each, low first).
// The primary row (SA 0) stores code 0 and row_sa1 (SA 1) stores code T[0]; queries subtract those fake
// entries. With OCC_WIDE = s > 0 (2**32 rows or more) a block's counts start at its superblock of 2**s rows,
// whose whole counts (16 uint64 as two uint32) follow the blocks, and the sampled SA's m low words are
// followed by their bits 32, 32 a word.
//
// Compile-time constants (prepended by kernels/loader.py): OCC_WIDE (0, or the superblock shift: 31),
// COUNT_LOOKUPS (0/1: instrumented build counting occurrence-block visits in g_lookups).
// Checked with: nvcc -arch=sm_90 -cubin -Xptxas -v kernels/smem.cu

#ifndef OCC_WIDE
#define OCC_WIDE 0
#endif

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int occ_t;  // both layouts

#ifndef COUNT_LOOKUPS
#define COUNT_LOOKUPS 0
#endif
#if COUNT_LOOKUPS
// instrumented build (benchmark only): number of occurrence-block visits (occ1/occ2 calls)
__device__ unsigned long long g_lookups;
#define COUNT_LOOKUP() atomicAdd(&g_lookups, 1ULL)
#else
#define COUNT_LOOKUP() ((void)0)
#endif

#define OCC_SHIFT 6
#define OCC_INTV 64
#define NIB_LO 0x1111111111111111ULL

// Index scalars, packed by aligner/mem/gpu/smem.py:fm_params_array (int64[29]).
#define P_N 0
#define P_PRIMARY 1
#define P_ROW_SA1 2
#define P_T0 3
#define P_STRIDE 4
#define P_SA_SHIFT 5
#define P_C1 6   // C1[0..5]
#define P_C2 12  // C2[0..16]
#define P_LEN 29

struct FM {
    const occ_t* occ;
    const occ_t* sa;
    i64 n, primary, row_sa1, t0, stride, sa_shift;
#if OCC_WIDE
    i64 nbw, m_sa;  // words of the blocks (the superblocks' counts follow); SA samples (their bits 32 follow)
#endif
    const i64* C1;  // -> shared memory copy of P (indexed by base: kept out of local memory)
    const i64* C2;
};

__device__ __forceinline__ void fm_load(FM& fm, const occ_t* occ, const occ_t* sa, const i64* P) {  // P: shared memory
    fm.occ = occ;
    fm.sa = sa;
    fm.n = P[P_N];
    fm.primary = P[P_PRIMARY];
    fm.row_sa1 = P[P_ROW_SA1];
    fm.t0 = P[P_T0];
    fm.stride = P[P_STRIDE];
    fm.sa_shift = P[P_SA_SHIFT];
#if OCC_WIDE
    fm.nbw = (((fm.n + 1) >> OCC_SHIFT) + 1) * fm.stride;
    fm.m_sa = (fm.n >> fm.sa_shift) + 1;
#endif
    fm.C1 = P + P_C1;
    fm.C2 = P + P_C2;
}

// code word w (0..3) of the block starting at occ[base]
__device__ __forceinline__ u64 code_word(const FM& fm, i64 base, int w) {
    return __ldg(reinterpret_cast<const u64*>(fm.occ + base + 16) + w);  // base even: 8-byte aligned
}

// the count of code ab in the rows before row i's superblock (wide layout; 0 otherwise)
__device__ __forceinline__ i64 sup_count(const FM& fm, i64 i, int ab) {
#if OCC_WIDE
    return (i64)__ldg(reinterpret_cast<const u64*>(fm.occ + fm.nbw) + (i >> OCC_WIDE) * 16 + ab);
#else
    return 0;
#endif
}

// rows < r of the block whose full 4-bit code equals the pattern nibble (pat = code * NIB_LO)
__device__ __forceinline__ int count_pair(const FM& fm, i64 base, int r, u64 pat) {
    int cnt = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        int lim = r - 16 * w;
        if (lim <= 0) break;
        u64 x = code_word(fm, base, w) ^ pat;
        x |= x >> 1;
        x |= x >> 2;
        u64 m = ~x & NIB_LO;
        if (lim < 16) m &= ~0ULL >> (64 - 4 * lim);
        cnt += __popcll(m);
    }
    return cnt;
}

// rows < r of the block whose code's low 2 bits (the BWT base) equal those of pat
__device__ __forceinline__ int count_low2(const FM& fm, i64 base, int r, u64 pat) {
    int cnt = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        int lim = r - 16 * w;
        if (lim <= 0) break;
        u64 x = code_word(fm, base, w) ^ pat;
        x |= x >> 1;
        u64 m = ~x & NIB_LO;
        if (lim < 16) m &= ~0ULL >> (64 - 4 * lim);
        cnt += __popcll(m);
    }
    return cnt;
}

__device__ __forceinline__ i64 occ2(const FM& fm, int ab, i64 i) {
    COUNT_LOOKUP();
    i64 base = (i >> OCC_SHIFT) * fm.stride;
    i64 cnt = (i64)__ldg(fm.occ + base + ab) + sup_count(fm, i, ab);
    cnt += count_pair(fm, base, (int)(i & (OCC_INTV - 1)), (u64)ab * NIB_LO);
    if (ab == 0 && fm.primary < i) cnt -= 1;
    if (ab == fm.t0 && fm.row_sa1 < i) cnt -= 1;
    return cnt;
}

__device__ __forceinline__ i64 occ1(const FM& fm, int c, i64 i) {
    COUNT_LOOKUP();
    i64 base = (i >> OCC_SHIFT) * fm.stride;
    i64 cnt = (i64)__ldg(fm.occ + base + c) + (i64)__ldg(fm.occ + base + 4 + c) +
              (i64)__ldg(fm.occ + base + 8 + c) + (i64)__ldg(fm.occ + base + 12 + c);
#if OCC_WIDE
    cnt += sup_count(fm, i, c) + sup_count(fm, i, 4 + c) + sup_count(fm, i, 8 + c) + sup_count(fm, i, 12 + c);
#endif
    cnt += count_low2(fm, base, (int)(i & (OCC_INTV - 1)), (u64)c * NIB_LO);
    if (c == 0 && fm.primary < i) cnt -= 1;
    return cnt;
}

__device__ __forceinline__ int fm_bwt(const FM& fm, i64 row) {
    if (row == fm.primary) return 4;
    i64 base = (row >> OCC_SHIFT) * fm.stride;
    int r = (int)(row & (OCC_INTV - 1));
    u64 word = code_word(fm, base, r >> 4);
    return (int)((word >> (4 * (r & 15))) & 3);
}

// fm_step1: prepend base c to [k, l)
__device__ __forceinline__ void fm_step1(const FM& fm, i64 k, i64 l, int c, i64& k2, i64& l2) {
    if (c > 3) { k2 = l2 = fm.n + 1; return; }
    i64 C = fm.C1[c];
    k2 = C + occ1(fm, c, k);
    l2 = C + occ1(fm, c, l);
}

// fm_step2: prepend a, b (a leftmost) to [k, l)
__device__ __forceinline__ void fm_step2(const FM& fm, i64 k, i64 l, int a, int b, i64& k2, i64& l2) {
    if (a > 3 || b > 3) { k2 = l2 = fm.n + 1; return; }
    int ab = (a << 2) | b;
    i64 C = fm.C2[ab];
    k2 = C + occ2(fm, ab, k);
    l2 = C + occ2(fm, ab, l);
}

// fm_sa: text position of a row by LF walking to a sampled row
__device__ i64 fm_sa(const FM& fm, i64 row) {
    i64 mask = ((i64)1 << fm.sa_shift) - 1;
    i64 steps = 0;
    while (row & mask) {
        if (row == fm.primary) return steps;
        int c = fm_bwt(fm, row);
        row = fm.C1[c] + occ1(fm, c, row);
        ++steps;
    }
    const i64 j = row >> fm.sa_shift;
    i64 v = (i64)__ldg(fm.sa + j);
#if OCC_WIDE
    v |= (i64)((__ldg(fm.sa + fm.m_sa + (j >> 5)) >> (j & 31)) & 1u) << 32;
#endif
    return steps + v;
}

// ------------------------------------------------------------------------------------------------
// SMEM search (aligner/mem/smem.py). A read is q[0..L) (codes 0..4); its reverse complement is read on
// the fly: rc[i] = comp(q[L-1-i]).
// ------------------------------------------------------------------------------------------------

struct Read {
    const unsigned char* q;
    int L;
    __device__ __forceinline__ int fwd(int i) const { return __ldg(q + i); }
    __device__ __forceinline__ int rev(int i) const {
        int c = __ldg(q + L - 1 - i);
        return c < 4 ? 3 - c : 4;
    }
};

// backward_search over s = q (is_rc false) or rc (true): longest suffix s[b..e) with b >= lo, no base
// > 3, occurring >= min_intv times; returns b, [k, l).
__device__ int backward_search(const FM& fm, const Read& rd, bool is_rc, int e, int lo, i64 min_intv,
                               i64& k_out, i64& l_out) {
    i64 k = 0, l = fm.n + 1;
    int i = e;
    while (i - 2 >= lo) {
        int a = is_rc ? rd.rev(i - 2) : rd.fwd(i - 2);
        int c = is_rc ? rd.rev(i - 1) : rd.fwd(i - 1);
        if (a > 3 || c > 3) break;
        i64 k2, l2;
        fm_step2(fm, k, l, a, c, k2, l2);
        if (l2 - k2 >= min_intv) {
            k = k2; l = l2; i -= 2;
        } else {
            i64 k1, l1;
            fm_step1(fm, k, l, c, k1, l1);
            if (l1 - k1 >= min_intv) { k_out = k1; l_out = l1; return i - 1; }
            k_out = k; l_out = l; return i;
        }
    }
    if (i - 1 >= lo) {
        int c = is_rc ? rd.rev(i - 1) : rd.fwd(i - 1);
        if (c <= 3) {
            i64 k1, l1;
            fm_step1(fm, k, l, c, k1, l1);
            if (l1 - k1 >= min_intv) { k_out = k1; l_out = l1; return i - 1; }
        }
    }
    k_out = k; l_out = l;
    return i;
}

__device__ __forceinline__ int forward_end(const FM& fm, const Read& rd, int s, i64 min_intv) {
    i64 k, l;
    int b = backward_search(fm, rd, true, rd.L - s, 0, min_intv, k, l);
    return rd.L - b;
}

// A thread's slot of interval records: key = start<<32|end, k = first SA row, s = size.
struct Slot {
    i64* key;
    i64* k;
    i64* s;
    i64 stride;  // threads in the launch (record j of this thread is at j*stride + tid)
    i64 tid;
    int cap;
    int n;  // records appended so far (may pass cap: overflow)
    __device__ __forceinline__ i64 at(int j) const { return (i64)j * stride + tid; }
    __device__ __forceinline__ void push(int b, int e, i64 k_, i64 s_) {
        if (n < cap) {
            i64 a = at(n);
            key[a] = ((i64)b << 32) | (i64)e;
            k[a] = k_;
            s[a] = s_;
        }
        ++n;
    }
    __device__ __forceinline__ i64 K(int j) const { return key[at(j)]; }
    __device__ __forceinline__ void swap(int i, int j) {
        i64 a = at(i), b = at(j), t;
        t = key[a]; key[a] = key[b]; key[b] = t;
        t = k[a]; k[a] = k[b]; k[b] = t;
        t = s[a]; s[a] = s[b]; s[b] = t;
    }
};

// bwa's bwt_smem1(x, min_intv), keeping only matches of length >= min_len (the filter that
// collect_intv applies to smem1's output). Appends in ascending start order; returns ret.
__device__ int smem1(const FM& fm, const Read& rd, int x, i64 min_intv, int min_len, Slot& sl) {
    if (rd.fwd(x) > 3) return x + 1;
    if (min_intv < 1) min_intv = 1;
    int ret = forward_end(fm, rd, x, min_intv);
    if (ret == x) {
        i64 k, l;
        fm_step1(fm, 0, fm.n + 1, rd.fwd(x), k, l);
        if (1 >= min_len) sl.push(x, x + 1, k, l - k);
        return x + 1;
    }
    int start = sl.n;
    int e = ret;
    while (true) {
        i64 k, l;
        int b = backward_search(fm, rd, false, e, 0, min_intv, k, l);
        if (e - b >= min_len) sl.push(b, e, k, l - k);
        int s = b - 1;
        if (s < 0 || rd.fwd(s) > 3) break;
        e = forward_end(fm, rd, s, min_intv);
        if (e <= x) break;
    }
    // emitted with decreasing start: reverse to ascending like bwa
    if (sl.n <= sl.cap) {
        int i = start, j = sl.n - 1;
        while (i < j) { sl.swap(i, j); ++i; --j; }
    }
    return ret;
}

// bwa's bwt_seed_strategy1 (third round). Returns next x; found/r/k/s through references.
__device__ int seed_strategy1(const FM& fm, const Read& rd, int x, int min_len, i64 max_intv, bool& found,
                              int& r_out, i64& k_out, i64& s_out) {
    found = false;
    if (rd.fwd(x) > 3) return x + 1;
    int rstar = forward_end(fm, rd, x, max_intv);
    int amb = x;
    while (amb < rd.L && rd.fwd(amb) <= 3) ++amb;
    int r = rstar + 1;
    if (r < x + min_len + 1) r = x + min_len + 1;
    if (r > amb) return amb < rd.L ? amb + 1 : rd.L;
    i64 k, l;
    backward_search(fm, rd, false, r, x, 0, k, l);
    found = true;
    r_out = r;
    k_out = k;
    s_out = l - k;
    return r;
}

// ksort.h introsort over the slot's records [0, n), comparing keys (aligner/mem/ksort.py, same moves).
__device__ void slot_insertsort(Slot& sl, int s, int t) {
    for (int i = s + 1; i < t; ++i)
        for (int j = i; j > s && sl.K(j) < sl.K(j - 1); --j) sl.swap(j, j - 1);
}

__device__ void slot_combsort(Slot& sl, int s, int n) {
    const double shrink = 1.2473309501039786540366528676643;
    i64 gap = n;
    bool do_swap;
    while (true) {
        if (gap > 2) {
            gap = (i64)((double)gap / shrink);
            if (gap == 9 || gap == 10) gap = 11;
        }
        do_swap = false;
        for (i64 i = s; i < s + n - gap; ++i) {
            i64 j = i + gap;
            if (sl.K((int)j) < sl.K((int)i)) { sl.swap((int)i, (int)j); do_swap = true; }
        }
        if (!(do_swap || gap > 2)) break;
    }
    if (gap != 1) slot_insertsort(sl, s, s + n);
}

#define KS_STACK 64

__device__ void slot_introsort(Slot& sl, int n) {
    if (n < 1) return;
    if (n == 2) {
        if (sl.K(1) < sl.K(0)) sl.swap(0, 1);
        return;
    }
    int d = 2;
    while ((1 << d) < n) ++d;
    int stack_l[KS_STACK], stack_r[KS_STACK], stack_d[KS_STACK];
    int top = 0;
    int s = 0, t = n - 1;
    d <<= 1;
    while (true) {
        if (s < t) {
            if (--d == 0) {
                slot_combsort(sl, s, t - s + 1);
                t = s;
                continue;
            }
            int i = s, j = t;
            int k = i + ((j - i) >> 1) + 1;
            i64 Ki = sl.K(i), Kj = sl.K(j), Kk = sl.K(k);
            if (Kk < Ki) {
                if (Kk < Kj) k = j;
            } else {
                k = (Kj < Ki) ? i : j;
            }
            i64 rp = sl.K(k);
            if (k != t) sl.swap(k, t);
            while (true) {
                do ++i; while (sl.K(i) < rp);
                do --j; while (i <= j && rp < sl.K(j));
                if (j <= i) break;
                sl.swap(i, j);
            }
            sl.swap(i, t);
            if (i - s > t - i) {
                if (i - s > 16) { stack_l[top] = s; stack_r[top] = i - 1; stack_d[top] = d; ++top; }
                s = (t - i > 16) ? i + 1 : t;
            } else {
                if (t - i > 16) { stack_l[top] = i + 1; stack_r[top] = t; stack_d[top] = d; ++top; }
                t = (i - s > 16) ? i - 1 : s;
            }
        } else {
            if (top == 0) {
                slot_insertsort(sl, 0, n);
                return;
            }
            --top;
            s = stack_l[top]; t = stack_r[top]; d = stack_d[top];
        }
    }
}

// mem_collect_intv for reads read_ids[0..nthreads). Slot records go to (skey, sk, ss); the count to
// n_out[t] (-1: more than cap records, nothing usable).
extern "C" __global__ void collect_intv_kernel(
    const occ_t* __restrict__ occ, const occ_t* __restrict__ sa, const i64* __restrict__ P,
    const unsigned char* __restrict__ seq, const i64* __restrict__ seq_off, const i64* __restrict__ read_ids,
    i64 nthreads, int min_seed_len, int split_len, int split_width, int max_mem_intv, int cap,
    i64* __restrict__ skey, i64* __restrict__ sk, i64* __restrict__ ss, int* __restrict__ n_out) {
    __shared__ i64 sP[P_LEN];
    if (threadIdx.x < P_LEN) sP[threadIdx.x] = P[threadIdx.x];
    __syncthreads();
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nthreads) return;
    FM fm;
    fm_load(fm, occ, sa, sP);
    i64 rid = read_ids[tid];
    i64 q0 = seq_off[rid];
    Read rd;
    rd.q = seq + q0;
    rd.L = (int)(seq_off[rid + 1] - q0);
    Slot sl;
    sl.key = skey; sl.k = sk; sl.s = ss;
    sl.stride = nthreads; sl.tid = tid; sl.cap = cap; sl.n = 0;
    const int L = rd.L;

    // round 1: all SMEMs
    int x = 0;
    while (x < L) {
        if (rd.fwd(x) < 4) x = smem1(fm, rd, x, 1, min_seed_len, sl);
        else ++x;
        if (sl.n > cap) break;
    }
    if (sl.n > cap) { n_out[tid] = -1; return; }
    // round 2: re-seed long SMEMs with few occurrences
    int old_n = sl.n;
    for (int j = 0; j < old_n; ++j) {
        i64 a = sl.at(j);
        i64 key = sl.key[a];
        int start = (int)(key >> 32), end = (int)(key & 0xffffffffLL);
        i64 sz = sl.s[a];
        if (end - start < split_len || sz > split_width) continue;
        smem1(fm, rd, (start + end) >> 1, sz + 1, min_seed_len, sl);
        if (sl.n > cap) { n_out[tid] = -1; return; }
    }
    // round 3: LAST-like seeds
    if (max_mem_intv > 0) {
        x = 0;
        while (x < L) {
            if (rd.fwd(x) < 4) {
                int x0 = x;
                bool found;
                int r;
                i64 k, s;
                x = seed_strategy1(fm, rd, x0, min_seed_len, max_mem_intv, found, r, k, s);
                if (found && s > 0) sl.push(x0, r, k, s);
            } else {
                ++x;
            }
        }
    }
    if (sl.n > cap) { n_out[tid] = -1; return; }
    slot_introsort(sl, sl.n);
    n_out[tid] = sl.n;
}

// Copy slots of threads [0, nthreads) into the CSR arrays at out_off[t] (already scanned).
extern "C" __global__ void compact_kernel(
    const i64* __restrict__ skey, const i64* __restrict__ sk, const i64* __restrict__ ss,
    const int* __restrict__ n_out, const i64* __restrict__ out_off, i64 nthreads,
    i64* __restrict__ mb, i64* __restrict__ me, i64* __restrict__ mk, i64* __restrict__ ms) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nthreads) return;
    int n = n_out[tid];
    i64 o = out_off[tid];
    for (int j = 0; j < n; ++j) {
        i64 a = (i64)j * nthreads + tid;
        i64 key = skey[a];
        mb[o + j] = key >> 32;
        me[o + j] = key & 0xffffffffLL;
        mk[o + j] = sk[a];
        ms[o + j] = ss[a];
    }
}

// ------------------------------------------------------------------------------------------------
// Seed positions (aligner/mem/chain.py make_seeds): interval i yields c_i = min(ceil(s/step), max_occ)
// occurrences, step = s > max_occ ? s / max_occ : 1, rows mk + j*step. One thread per occurrence;
// occ_off is the exclusive scan of c_i (n_intv + 1 entries).
// ------------------------------------------------------------------------------------------------

#include "bns.cuh"

__device__ __forceinline__ i64 intv2rid(const i64* off, i64 n_ctg, i64 l_pac, i64 rb, i64 re) {
    if (rb < l_pac && re > l_pac) return -2;
    i64 pb = rb >= l_pac ? (l_pac << 1) - 1 - rb : rb;
    i64 rid_b = pos2rid(off, n_ctg, l_pac, pb);
    i64 rid_e;
    if (rb < re) {
        i64 pe = re - 1 >= l_pac ? (l_pac << 1) - 1 - (re - 1) : re - 1;
        rid_e = pos2rid(off, n_ctg, l_pac, pe);
    } else {
        rid_e = rid_b;
    }
    return rid_b == rid_e ? rid_b : -1;
}

extern "C" __global__ void seed_pos_kernel(
    const occ_t* __restrict__ occ, const occ_t* __restrict__ sa, const i64* __restrict__ P,
    const i64* __restrict__ mb, const i64* __restrict__ me, const i64* __restrict__ mk,
    const i64* __restrict__ ms, const i64* __restrict__ occ_off, i64 n_intv, i64 n_seeds, int max_occ,
    const i64* __restrict__ ctg_off, i64 n_ctg, i64 l_pac,
    i64* __restrict__ s_rbeg, int* __restrict__ s_qbeg, int* __restrict__ s_len, int* __restrict__ s_rid) {
    __shared__ i64 sP[P_LEN];
    if (threadIdx.x < P_LEN) sP[threadIdx.x] = P[threadIdx.x];
    __syncthreads();
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_seeds) return;
    FM fm;
    fm_load(fm, occ, sa, sP);
    // interval of this occurrence: last i with occ_off[i] <= t
    i64 lo = 0, hi = n_intv;  // invariant: occ_off[lo] <= t < occ_off[hi]
    while (hi - lo > 1) {
        i64 mid = (lo + hi) >> 1;
        if (occ_off[mid] <= t) lo = mid; else hi = mid;
    }
    i64 s = ms[lo];
    i64 step = s > max_occ ? s / max_occ : 1;
    i64 row = mk[lo] + (t - occ_off[lo]) * step;
    i64 rb = fm_sa(fm, row);
    i64 slen = me[lo] - mb[lo];
    s_rbeg[t] = rb;
    s_qbeg[t] = (int)mb[lo];
    s_len[t] = (int)slen;
    s_rid[t] = (int)intv2rid(ctg_off, n_ctg, l_pac, rb, rb + slen);
}
