// Seed lookup for a batch of reads (minimap2 2.24 map.c / seed.c).
//
// Byte-identical, read by read, to the CPU twin aligner/map/seed.py:seed_read given that read's
// minimizers (the CSR that kernels/mmsketch.cu writes): the minimizers left by the query-occurrence
// filter (seed_mz_flt), the anchors a (n, 2) uint64 in collect_seed_hits order (in-place MSD radix
// sort, radix_sort_x) or, with MM_F_HEAP_SORT (preset sr), in collect_seed_hits_heap order, rep_len
// and mini_pos. Layouts: docs/MM_PORT.md (x = hash << 8 | span, y = seg << 32 | pos << 1 | strand;
// a[:,0] = rev << 63 | rid << 32 | rpos, a[:,1] = seg << 48 | flags | span << 32 | qpos).
//
// Passes (launcher and scans: aligner/map/gpu/seed.py). Every variable-length output is placed by an
// exclusive scan of exact counts, so nothing has a fixed slot that could overflow.
//   sd_fill_rid     one warp per read: read id of every minimizer (coalesced fill).
//   sd_qocc_insert  one thread per minimizer of the reads that seed_mz_flt filters (n > q_occ_max):
//                   counts equal x in a per-read open-addressing table (size a power of two >= 2n,
//                   entries = index of the first minimizer with that x, + 1; atomicCAS / atomicAdd).
//   sd_qocc_keep    one thread per minimizer: seed_mz_flt's keep rule from that count (C float math).
//   sd_compact      one thread per minimizer: kept minimizers -> mv (order kept) and their read ids.
//   sd_lookup       one thread per mv entry: mm_idx_get (bucket h & (2^b - 1), binary search of the
//                   bucket's sorted keys), occurrence start/count, tandem flag (mm_seed_collect_all).
//   sd_select       one thread per read: mm_seed_select (high-occurrence streaks; the 128-entry max-heap
//                   lives in local memory) and rep_len (mm_collect_matches).  Works on the mv entries
//                   with count > 0 in place (indices within the read instead of within the matched
//                   list: a monotone relabelling, so every heap comparison and tie is the same).
//   sd_count        one thread per mv entry: kept (matched, not filtered) and its anchor count (all
//                   occurrences, or those that pass skip_seed when the flag asks for it).
//   sd_emit         one thread per kept seed: mini_pos (and the seed's mv index for sd_heap), and (radix
//                   path) its anchors in occurrence order at the scanned offset, which is
//                   collect_seed_hits' unsorted order.
//   sd_sort_block   one block per read (longest first): radix_sort_x on the read's anchors, in shared
//                   memory where they fit (same in-place cycle walk, so equal keys end where minimap2
//                   leaves them). The block partitions big ranges; its threads sort the small buckets
//                   (sd_radix_range: instead of a stack of pending buckets it keeps one (range, next
//                   child) record per level, 8 levels; buckets are disjoint, so the order they are
//                   visited in does not change the result).
//   sd_heap         one thread per read: collect_seed_hits_heap's k-way min-heap merge (scratch hx, hy in
//                   global memory, reverse-strand anchors through a scratch buffer, appended after).
//
// Memory per thread: sd_radix_range keeps its 2 x 256 bucket pointers and level records in local
// memory, sd_select its heap (1 KB). Thread-per-read kernels run in 64-thread blocks without
// __launch_bounds__ (with it ptxas aimed at ~40 registers and spilled). Only sd_sort_block uses shared
// memory and __syncthreads: tests/test_mmseed_gpu.py runs this file as host C++, one thread at a time
// (sd_sort_block: a block's threads on host threads), through the launcher's own pass order.
//
// Cost notes: sd_heap is sequential per read (a read with 10^5 anchors keeps one thread busy); sd_emit
// writes all occurrences of a seed from one thread.  Correct first; see the module docstring of
// aligner/map/gpu/seed.py.

typedef unsigned long long u64;
typedef long long i64;

#define SD_F_NO_DIAG 0x001ll
#define SD_F_NO_DUAL 0x002ll
#define SD_F_FOR_ONLY 0x100000ll
#define SD_F_REV_ONLY 0x200000ll
#define SD_F_HEAP_SORT 0x400000ll
#define SD_F_QSTRAND 0x100000000ll
#define SD_F_SKIP (SD_F_NO_DIAG | SD_F_NO_DUAL | SD_F_FOR_ONLY | SD_F_REV_ONLY)

#define SD_MAX_MAX_HIGH_OCC 128  // mm_seed_select keeps at most this many seeds per streak
#define SD_RS_MIN_SIZE 64        // radix sort: insertion sort at or below this size
#ifndef SD_SB_THREADS
#define SD_SB_THREADS 128        // sd_sort_block: threads per block (the launcher's block size)
#endif
#define SD_SB_BIG 256            // sd_sort_block: ranges above this many anchors are partitioned by the block
#define SD_SB_STACK 64           // sd_sort_block: pending block-partitioned ranges at most

__device__ __forceinline__ i64 sd_thread() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }

// ------------------------------------------------------------------------------------------------
// read ids
// ------------------------------------------------------------------------------------------------

// One warp per read: rid[off[r] .. off[r+1]) = r.
extern "C" __global__ void sd_fill_rid(const i64* __restrict__ off, i64 n_reads, int* __restrict__ rid)
{
    const i64 r = sd_thread() >> 5;
    if (r >= n_reads) return;
    const i64 e = off[r + 1];
    for (i64 j = off[r] + (threadIdx.x & 31); j < e; j += 32) rid[j] = (int)r;
}

// ------------------------------------------------------------------------------------------------
// seed_mz_flt: drop every x occurring more than q_occ_max times and more than q_occ_frac * n times
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ i64 sd_tbl_slot(u64 x, i64 mask)
{
    u64 h = x * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return (i64)(h & (u64)mask);
}

// Thread per minimizer i of read r = rid[i] whose table [tbl_off[r], tbl_off[r+1]) is not empty:
// add one to the count of its x (tkey holds the read-local index + 1 of the first minimizer seen with
// that x; 0 is empty).
extern "C" __global__ void sd_qocc_insert(const ulonglong2* __restrict__ mz, const i64* __restrict__ mz_off,
                                          const int* __restrict__ rid, i64 n_mz, const i64* __restrict__ tbl_off,
                                          unsigned* __restrict__ tkey, unsigned* __restrict__ tcnt)
{
    const i64 i = sd_thread();
    if (i >= n_mz) return;
    const int r = rid[i];
    const i64 t0 = tbl_off[r], mask = tbl_off[r + 1] - t0 - 1;
    if (mask < 0) return;
    const i64 o = mz_off[r];
    const u64 x = mz[i].x;
    for (i64 h = sd_tbl_slot(x, mask);; h = (h + 1) & mask) {
        unsigned cur = tkey[t0 + h];
        if (cur == 0) {
            cur = atomicCAS(&tkey[t0 + h], 0u, (unsigned)(i - o + 1));
            if (cur == 0) {
                atomicAdd(&tcnt[t0 + h], 1u);
                return;
            }
        }
        if (mz[o + cur - 1].x == x) {
            atomicAdd(&tcnt[t0 + h], 1u);
            return;
        }
    }
}

// Thread per minimizer: keep[i] = 1 unless its read is filtered and (count > q_occ_max and
// count > n * q_occ_frac in C float arithmetic, or x == 0), as seed_mz_flt.
extern "C" __global__ void sd_qocc_keep(const ulonglong2* __restrict__ mz, const i64* __restrict__ mz_off,
                                        const int* __restrict__ rid, i64 n_mz, const i64* __restrict__ tbl_off,
                                        const unsigned* __restrict__ tkey, const unsigned* __restrict__ tcnt,
                                        i64 q_occ_max, float q_occ_frac, i64* __restrict__ keep)
{
    const i64 i = sd_thread();
    if (i >= n_mz) return;
    const int r = rid[i];
    const i64 t0 = tbl_off[r], mask = tbl_off[r + 1] - t0 - 1;
    if (mask < 0) {
        keep[i] = 1;
        return;
    }
    const i64 o = mz_off[r];
    const u64 x = mz[i].x;
    i64 h = sd_tbl_slot(x, mask);
    while (mz[o + tkey[t0 + h] - 1].x != x) h = (h + 1) & mask;
    const i64 cnt = tcnt[t0 + h];
    const float lim = __fmul_rn((float)(mz_off[r + 1] - o), q_occ_frac);
    keep[i] = (cnt > q_occ_max && (float)cnt > lim) || x == 0 ? 0 : 1;
}

// Thread per minimizer: kept ones to mv[scan[i]] with their read id.
extern "C" __global__ void sd_compact(const ulonglong2* __restrict__ mz, const int* __restrict__ rid, i64 n_mz,
                                      const i64* __restrict__ scan, ulonglong2* __restrict__ mv,
                                      int* __restrict__ rid_f)
{
    const i64 i = sd_thread();
    if (i >= n_mz) return;
    const i64 j = scan[i];
    if (scan[i + 1] == j) return;
    mv[j] = mz[i];
    rid_f[j] = rid[i];
}

// ------------------------------------------------------------------------------------------------
// lookup (mm_seed_collect_all)
// ------------------------------------------------------------------------------------------------

// Thread per mv entry j: s_st/s_n = the occurrences pos[s_st, s_st + s_n) of its hash (s_n 0: absent,
// or the read has length 0); s_tan = 1 when a neighbour in mv has the same hash.
extern "C" __global__ void sd_lookup(const ulonglong2* __restrict__ mv, const i64* __restrict__ mv_off,
                                     const int* __restrict__ rid, i64 n_mv, const i64* __restrict__ qlen, int b,
                                     const i64* __restrict__ bkt_off, const u64* __restrict__ keys,
                                     const i64* __restrict__ key_off, i64* __restrict__ s_st,
                                     i64* __restrict__ s_n, unsigned char* __restrict__ s_tan)
{
    const i64 j = sd_thread();
    if (j >= n_mv) return;
    const int r = rid[j];
    const u64 h = mv[j].x >> 8;
    i64 st = 0, cnt = 0;
    if (qlen[r] > 0) {
        const i64 bk = (i64)(h & ((1ull << b) - 1));
        i64 lo = __ldg(bkt_off + bk), hi = __ldg(bkt_off + bk + 1);
        const i64 end = hi;
        while (lo < hi) {
            const i64 mid = (lo + hi) >> 1;
            if (__ldg(keys + mid) < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < end && __ldg(keys + lo) == h) {
            st = __ldg(key_off + lo);
            cnt = __ldg(key_off + lo + 1) - st;
        }
    }
    s_st[j] = st;
    s_n[j] = cnt;
    unsigned char tan = 0;
    if (cnt > 0) {
        if (j > mv_off[r] && (mv[j - 1].x >> 8) == h) tan = 1;
        if (j + 1 < mv_off[r + 1] && (mv[j + 1].x >> 8) == h) tan = 1;
    }
    s_tan[j] = tan;
}

// ------------------------------------------------------------------------------------------------
// mm_seed_select + rep_len (one thread per read)
// ------------------------------------------------------------------------------------------------

// ks_heapdown on a max-heap of uint64
__device__ __forceinline__ void sd_maxheap_down(u64* h, i64 i, i64 n)
{
    const u64 tmp = h[i];
    i64 k = i;
    while ((k = (k << 1) + 1) < n) {
        if (k != n - 1 && h[k] < h[k + 1]) ++k;
        if (h[k] < tmp) break;
        h[i] = h[k];
        i = k;
    }
    h[i] = tmp;
}

__device__ __forceinline__ i64 sd_qpos(const ulonglong2* mv, i64 j) { return (i64)(mv[j].y & 0xFFFFFFFFull); }

// One streak: matched seeds in (last0, en) of the read (read-local indices, offset o), all above max_occ.
__device__ __forceinline__ void sd_streak(const i64* s_n, unsigned char* s_flt, i64 o, i64 st, i64 en, i64 ps, i64 pe,
                          i64 max_max_occ, i64 dist)
{
    u64 heap[SD_MAX_MAX_HIGH_OCC];
    i64 max_high_occ = (i64)((double)(pe - ps) / (double)dist + 0.499);
    if (max_high_occ > 0) {
        if (max_high_occ > SD_MAX_MAX_HIGH_OCC) max_high_occ = SD_MAX_MAX_HIGH_OCC;
        i64 j = st, k = 0;
        for (; j < en && k < max_high_occ; ++j)
            if (s_n[o + j] > 0) heap[k++] = (u64)s_n[o + j] << 32 | (u64)j;
        for (i64 t = (k >> 1) - 1; t >= 0; --t) sd_maxheap_down(heap, t, k);
        for (; j < en; ++j) {
            const i64 c = s_n[o + j];
            if (c > 0 && c < (i64)(heap[0] >> 32)) {
                heap[0] = (u64)c << 32 | (u64)j;
                sd_maxheap_down(heap, 0, k);
            }
        }
        for (i64 t = 0; t < k; ++t) s_flt[o + (i64)(heap[t] & 0xFFFFFFFFull)] = 1;
    }
    for (i64 j = st; j < en; ++j)
        if (s_n[o + j] > 0) s_flt[o + j] ^= 1;
    for (i64 j = st; j < en; ++j)
        if (s_n[o + j] > max_max_occ) s_flt[o + j] = 1;
}

// Thread t: read r = reads[t] (or t). s_flt must be zero on entry. rep_len[r] as mm_collect_matches.
extern "C" __global__ void sd_select(const i64* __restrict__ reads, i64 n_reads, const ulonglong2* __restrict__ mv,
                                     const i64* __restrict__ mv_off, const i64* __restrict__ qlen,
                                     const i64* __restrict__ s_n, i64 max_occ, i64 max_max_occ, i64 dist,
                                     unsigned char* __restrict__ s_flt, i64* __restrict__ rep_len)
{
    const i64 t = sd_thread();
    if (t >= n_reads) return;
    const i64 r = reads ? reads[t] : t;
    const i64 o = mv_off[r], n = mv_off[r + 1] - o;
    if (dist > 0 && max_max_occ > max_occ) {
        i64 m0 = 0, m = 0;
        for (i64 i = 0; i < n; ++i) {
            const i64 c = s_n[o + i];
            m0 += c > 0;
            m += c > max_occ;
        }
        if (m0 > 1 && m > 0) {
            i64 last0 = -1, n_hi = 0;  // last matched seed at or below max_occ; matched seeds above since
            for (i64 i = 0; i <= n; ++i) {
                if (i < n && s_n[o + i] == 0) continue;
                if (i == n || s_n[o + i] <= max_occ) {
                    if (n_hi > 0) {
                        const i64 ps = last0 < 0 ? 0 : sd_qpos(mv, o + last0) >> 1;
                        const i64 pe = i == n ? qlen[r] : sd_qpos(mv, o + i) >> 1;
                        sd_streak(s_n, s_flt, o, last0 + 1, i, ps, pe, max_max_occ, dist);
                    }
                    last0 = i;
                    n_hi = 0;
                } else {
                    ++n_hi;
                }
            }
        }
    } else {
        for (i64 i = 0; i < n; ++i)
            if (s_n[o + i] > 0 && s_n[o + i] > max_occ) s_flt[o + i] = 1;
    }
    i64 rl = 0, rs = 0, re = 0;
    for (i64 i = 0; i < n; ++i) {
        if (s_n[o + i] == 0 || !s_flt[o + i]) continue;
        const i64 en = (sd_qpos(mv, o + i) >> 1) + 1, st = en - (i64)(mv[o + i].x & 0xFF);
        if (st > re) {
            rl += re - rs;
            rs = st;
            re = en;
        } else {
            re = en;
        }
    }
    rep_len[r] = rl + (re - rs);
}

// ------------------------------------------------------------------------------------------------
// anchors
// ------------------------------------------------------------------------------------------------

// skip_seed: returns 1 to skip; *is_self as minimap2 sets it.
__device__ __forceinline__ int sd_skip(i64 flag, u64 r, i64 qpos, i64 diag_rid, const unsigned char* dual_skip,
                                       i64 n_dual, int* is_self)
{
    *is_self = 0;
    if (flag & (SD_F_NO_DIAG | SD_F_NO_DUAL)) {
        const i64 rid = (i64)(r >> 32);
        if ((flag & SD_F_NO_DIAG) && rid == diag_rid) {
            if ((i64)((r & 0xFFFFFFFFull) >> 1) == (qpos >> 1)) return 1;
            if ((i64)(r & 1) == (qpos & 1)) *is_self = 1;
        }
        if ((flag & SD_F_NO_DUAL) && n_dual > rid && dual_skip[rid] != 0) return 1;
    }
    if (flag & (SD_F_FOR_ONLY | SD_F_REV_ONLY)) {
        if ((i64)(r & 1) == (qpos & 1)) {
            if (flag & SD_F_REV_ONLY) return 1;
        } else if (flag & SD_F_FOR_ONLY) {
            return 1;
        }
    }
    return 0;
}

// _anchor of aligner/map/seed.py (collect_seed_hits' fill).
__device__ __forceinline__ ulonglong2 sd_anchor(u64 r, i64 qpos, i64 span, i64 seg, int tan, int is_self, i64 qlen,
                                                i64 flag, const i64* ref_len)
{
    const u64 hi = r & 0xFFFFFFFF00000000ull;
    const u64 rpos = (r & 0xFFFFFFFFull) >> 1;
    const u64 spanu = (u64)span << 32;
    ulonglong2 a;
    if ((i64)(r & 1) == (qpos & 1)) {
        a.x = hi | rpos;
        a.y = spanu | (u64)(qpos >> 1);
    } else if (!(flag & SD_F_QSTRAND)) {
        a.x = 1ull << 63 | hi | rpos;
        a.y = spanu | (u64)(qlen - ((qpos >> 1) + 1 - span) - 1);
    } else {
        const i64 ln = ref_len[(i64)(r >> 32)];
        a.x = 1ull << 63 | hi | (u64)(ln - ((i64)rpos + 1 - span) - 1);
        a.y = spanu | (u64)(qpos >> 1);
    }
    a.y |= (u64)seg << 48;
    if (tan) a.y |= 1ull << 42;     // MM_SEED_TANDEM
    if (is_self) a.y |= 1ull << 43; // MM_SEED_SELF
    return a;
}

// Thread per mv entry j: kept[j] = matched and not filtered; n_anc[j] = its anchors (all occurrences,
// or those skip_seed lets through when flag has MM_F_NO_DIAG/NO_DUAL/FOR_ONLY/REV_ONLY).
extern "C" __global__ void sd_count(const ulonglong2* __restrict__ mv, const int* __restrict__ rid, i64 n_mv,
                                    const i64* __restrict__ s_st, const i64* __restrict__ s_n,
                                    const unsigned char* __restrict__ s_flt, i64 flag, const u64* __restrict__ pos,
                                    const i64* __restrict__ diag_rid, const unsigned char* __restrict__ dual_skip,
                                    i64 n_dual, i64* __restrict__ kept, i64* __restrict__ n_anc)
{
    const i64 j = sd_thread();
    if (j >= n_mv) return;
    const i64 cnt = s_n[j];
    const int k = cnt > 0 && !s_flt[j];
    kept[j] = k;
    i64 na = k ? cnt : 0;
    if (k && (flag & SD_F_SKIP)) {
        const i64 qpos = sd_qpos(mv, j), st = s_st[j], dg = diag_rid[rid[j]];
        na = 0;
        int is_self;
        for (i64 t = 0; t < cnt; ++t)
            na += !sd_skip(flag, __ldg(pos + st + t), qpos, dg, dual_skip, n_dual, &is_self);
    }
    n_anc[j] = na;
}

// Thread per kept seed j: mini_pos[mp_scan[j]] = span << 32 | pos, kept_j[...] = j (when not null); unless flag has
// MM_F_HEAP_SORT, its anchors go to a[a_scan[j] ...] in occurrence order (collect_seed_hits).
extern "C" __global__ void sd_emit(const ulonglong2* __restrict__ mv, const int* __restrict__ rid, i64 n_mv,
                                   const i64* __restrict__ qlen, const i64* __restrict__ s_st,
                                   const i64* __restrict__ s_n, const unsigned char* __restrict__ s_tan,
                                   const unsigned char* __restrict__ s_flt, const i64* __restrict__ mp_scan,
                                   const i64* __restrict__ a_scan, i64 flag, const u64* __restrict__ pos,
                                   const i64* __restrict__ ref_len, const i64* __restrict__ diag_rid,
                                   const unsigned char* __restrict__ dual_skip, i64 n_dual,
                                   u64* __restrict__ mini_pos, i64* __restrict__ kept_j, ulonglong2* __restrict__ a)
{
    const i64 j = sd_thread();
    if (j >= n_mv) return;
    const i64 cnt = s_n[j];
    if (cnt == 0 || s_flt[j]) return;
    const ulonglong2 m = mv[j];
    const i64 qpos = (i64)(m.y & 0xFFFFFFFFull), span = (i64)(m.x & 0xFF), seg = (i64)(m.y >> 32);
    const i64 mp = mp_scan[j];
    mini_pos[mp] = (u64)span << 32 | (u64)(qpos >> 1);
    if (kept_j) kept_j[mp] = j;
    if (flag & SD_F_HEAP_SORT) return;
    const int r = rid[j];
    const i64 st = s_st[j], ql = qlen[r], dg = diag_rid[r];
    const int tan = s_tan[j];
    ulonglong2* out = a + a_scan[j];
    i64 na = 0;
    for (i64 t = 0; t < cnt; ++t) {
        const u64 p = __ldg(pos + st + t);
        int is_self = 0;
        if ((flag & SD_F_SKIP) && sd_skip(flag, p, qpos, dg, dual_skip, n_dual, &is_self)) continue;
        out[na++] = sd_anchor(p, qpos, span, seg, tan, is_self, ql, flag, ref_len);
    }
}

// ------------------------------------------------------------------------------------------------
// radix_sort_x (minimap2's radix_sort_128x on a[:,0]) in place, one thread per read
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ void sd_insertion(ulonglong2* a, unsigned beg, unsigned end)
{
    for (unsigned i = beg + 1; i < end; ++i) {
        if (a[i].x < a[i - 1].x) {
            const ulonglong2 t = a[i];
            unsigned j = i;
            while (j > beg && t.x < a[j - 1].x) {
                a[j] = a[j - 1];
                --j;
            }
            a[j] = t;
        }
    }
}

__device__ __forceinline__ unsigned sd_digit(u64 x, int s) { return (unsigned)(x >> s) & 255u; }

// rs_sort's in-place cycle walk over one range whose bucket bounds are set: bucket c spans
// [bb[c], be[c]) (bb advances to be as the bucket fills).  Shared by the thread's and the block's sorts.
__device__ __forceinline__ void sd_walk(ulonglong2* a, int s, unsigned* bb, const unsigned* be)
{
    unsigned c = 0;
    while (c < 256) {
        if (bb[c] != be[c]) {
            unsigned l = sd_digit(a[bb[c]].x, s);
            if (l != c) {
                ulonglong2 t = a[bb[c]];
                do {
                    const ulonglong2 sw = t;
                    t = a[bb[l]];
                    a[bb[l]++] = sw;
                    l = sd_digit(t.x, s);
                } while (l != c);
                a[bb[c]++] = t;
            } else {
                ++bb[c];
            }
        } else {
            ++c;
        }
    }
}

// One pass of rs_sort: distribute a[beg, end) into 256 buckets of digit (x >> s) & 255 by minimap2's
// in-place cycle walk.  bb/be: 256 entries each (scratch).  When one bucket holds the whole range the
// walk would move nothing, so it is skipped (the keys of a read share their top bytes).
__device__ __forceinline__ void sd_partition(ulonglong2* a, unsigned beg, unsigned end, int s, unsigned* bb,
                                             unsigned* be)
{
    for (int c = 0; c < 256; ++c) be[c] = 0;
    for (unsigned i = beg; i < end; ++i) ++be[sd_digit(a[i].x, s)];
    unsigned acc = beg, mx = 0;
    for (int c = 0; c < 256; ++c) {
        bb[c] = acc;
        mx = be[c] > mx ? be[c] : mx;
        acc += be[c];
        be[c] = acc;
    }
    if (mx < end - beg) sd_walk(a, s, bb, be);
}

// rs_sort on a[p0, q0) (more than SD_RS_MIN_SIZE entries) from shift s0 down, one thread.
__device__ __noinline__ void sd_radix_range(ulonglong2* a, unsigned p0, unsigned q0, int s0)
{
    unsigned bb[256], be[256];
    unsigned lv_end[8], lv_next[8];  // per level: end of the partitioned range, start of its next bucket
    int lv_s[8];                     // per level: the shift the range was partitioned on
    sd_partition(a, p0, q0, s0, bb, be);
    int top = 0;
    lv_end[0] = q0;
    lv_next[0] = p0;
    lv_s[0] = s0;
    while (top >= 0) {
        const int s = lv_s[top];
        const unsigned p = lv_next[top], e = lv_end[top];
        if (s == 0 || p >= e) {
            --top;
            continue;
        }
        // the next bucket: the run of equal digits at shift s starting at p
        const unsigned d = sd_digit(a[p].x, s);
        unsigned q = p + 1;
        while (q < e && sd_digit(a[q].x, s) == d) ++q;
        lv_next[top] = q;
        if (q - p > SD_RS_MIN_SIZE) {
            const int s2 = s > 8 ? s - 8 : 0;
            sd_partition(a, p, q, s2, bb, be);
            ++top;
            lv_end[top] = q;
            lv_next[top] = p;
            lv_s[top] = s2;
        } else if (q - p > 1) {
            sd_insertion(a, p, q);
        }
    }
}

// radix_sort_x, one block of SD_SB_THREADS per read (reads longest first), the read's anchors in
// dynamic shared memory when it has at most `cap` of them (else in place in global memory).  The same
// rs_sort, so the same order, ties included: a range of more than `big` anchors is partitioned by the
// whole block (digit counts with shared atomics, then one thread's cycle walk, skipped when one
// bucket holds all), its buckets then go to the threads (bucket c to thread c % SD_SB_THREADS): a big
// one back on the block's stack, the others sorted whole by that thread (sd_radix_range /
// sd_insertion).  Pending big ranges are disjoint and larger than big = max(SD_SB_BIG, n /
// SD_SB_STACK), so fewer than SD_SB_STACK are ever pending.
#ifndef SD_HOST
__device__ __forceinline__ ulonglong2* sd_dyn_smem()
{
    extern __shared__ __align__(16) unsigned char sd_dyn[];
    return reinterpret_cast<ulonglong2*>(sd_dyn);
}
#endif

extern "C" __global__ void __launch_bounds__(SD_SB_THREADS)
    sd_sort_block(const i64* __restrict__ reads, i64 n_reads, const i64* __restrict__ a_off,
                  ulonglong2* __restrict__ a, i64 cap)
{
    __shared__ unsigned cnt[256], bb[256], be[256];
    __shared__ unsigned st_p[SD_SB_STACK], st_q[SD_SB_STACK];
    __shared__ int st_s[SD_SB_STACK];
    __shared__ int top;
    ulonglong2* sh = sd_dyn_smem();
    const unsigned tid = threadIdx.x, nt = blockDim.x;
    for (i64 t = blockIdx.x; t < n_reads; t += gridDim.x) {
        const i64 o = a_off[reads[t]];
        const unsigned n = (unsigned)(a_off[reads[t] + 1] - o);
        const unsigned big = n / SD_SB_STACK > SD_SB_BIG ? n / SD_SB_STACK : SD_SB_BIG;
        ulonglong2* g = a + o;
        ulonglong2* v = (i64)n <= cap ? sh : g;
        if (v == sh)
            for (unsigned i = tid; i < n; i += nt) sh[i] = g[i];
        __syncthreads();  // the anchors are in
        if (tid == 0) {
            top = 0;
            if (n > SD_RS_MIN_SIZE) {
                st_p[0] = 0;
                st_q[0] = n;
                st_s[0] = 56;
                top = 1;
            } else if (n > 1) {
                sd_insertion(v, 0, n);
            }
        }
        __syncthreads();
        while (top > 0) {
            const unsigned p = st_p[top - 1], q = st_q[top - 1];
            const int s = st_s[top - 1];
            for (unsigned c = tid; c < 256; c += nt) cnt[c] = 0;
            __syncthreads();  // the top is read by all, the counts are cleared
            if (tid == 0) --top;
            for (unsigned i = p + tid; i < q; i += nt) atomicAdd(&cnt[sd_digit(v[i].x, s)], 1u);
            __syncthreads();
            if (tid == 0) {  // sd_partition's bounds and walk on the shared counts (one device function for
                             // both, inlined or not, made ptxas spill in this kernel or in sd_radix_range)
                unsigned acc = p, mx = 0;
                for (int c = 0; c < 256; ++c) {
                    bb[c] = acc;
                    mx = cnt[c] > mx ? cnt[c] : mx;
                    acc += cnt[c];
                    be[c] = acc;
                }
                if (mx < q - p) sd_walk(v, s, bb, be);
            }
            __syncthreads();
            if (s > 0) {
                const int s2 = s > 8 ? s - 8 : 0;
                for (unsigned c = tid; c < 256; c += nt) {
                    const unsigned m = cnt[c], e = be[c], b = e - m;
                    if (m > big) {
                        const int k = atomicAdd(&top, 1);
                        st_p[k] = b;
                        st_q[k] = e;
                        st_s[k] = s2;
                    } else if (m > SD_RS_MIN_SIZE) {
                        sd_radix_range(v, b, e, s2);
                    } else if (m > 1) {
                        sd_insertion(v, b, e);
                    }
                }
            }
            __syncthreads();  // the pushes are seen before the top is read again
        }
        if (v == sh)
            for (unsigned i = tid; i < n; i += nt) g[i] = sh[i];
        __syncthreads();  // the anchors are out before the next read's come in
    }
}

// ------------------------------------------------------------------------------------------------
// collect_seed_hits_heap (MM_F_HEAP_SORT), one thread per read
// ------------------------------------------------------------------------------------------------

// Sift down in a min-heap of (hx, hy) ordered by hx only.
__device__ __forceinline__ void sd_minheap_down(u64* hx, u64* hy, i64 i, i64 n)
{
    const u64 tx = hx[i], ty = hy[i];
    i64 k = i;
    while ((k = (k << 1) + 1) < n) {
        if (k != n - 1 && hx[k] > hx[k + 1]) ++k;
        if (hx[k] > tx) break;
        hx[i] = hx[k];
        hy[i] = hy[k];
        i = k;
    }
    hx[i] = tx;
    hy[i] = ty;
}

// Thread t: read r = reads[t] (or t). Its kept seeds are kept_j[mp_off[r], mp_off[r+1]) (mv indices);
// hx/hy are scratch over the same range, rev scratch over a's range.
extern "C" __global__ void sd_heap(const i64* __restrict__ reads, i64 n_reads, const ulonglong2* __restrict__ mv,
                                   const i64* __restrict__ mp_off, const i64* __restrict__ kept_j,
                                   const i64* __restrict__ s_st, const i64* __restrict__ s_n,
                                   const unsigned char* __restrict__ s_tan, const i64* __restrict__ qlen, i64 flag,
                                   const u64* __restrict__ pos, const i64* __restrict__ ref_len,
                                   const i64* __restrict__ diag_rid, const unsigned char* __restrict__ dual_skip,
                                   i64 n_dual, const i64* __restrict__ a_off, u64* __restrict__ hx,
                                   u64* __restrict__ hy, ulonglong2* __restrict__ rev, ulonglong2* __restrict__ a)
{
    const i64 t = sd_thread();
    if (t >= n_reads) return;
    const i64 r = reads ? reads[t] : t;
    const i64 mo = mp_off[r], nm = mp_off[r + 1] - mo, ao = a_off[r];
    if (ao == a_off[r + 1]) return;
    const i64 ql = qlen[r], dg = diag_rid[r];
    u64* X = hx + mo;
    u64* Y = hy + mo;
    i64 hs = 0;
    for (i64 i = 0; i < nm; ++i) {
        const i64 j = kept_j[mo + i];
        if (s_n[j] > 0) {
            X[hs] = __ldg(pos + s_st[j]);
            Y[hs] = (u64)i << 32;
            ++hs;
        }
    }
    for (i64 i = (hs >> 1) - 1; i >= 0; --i) sd_minheap_down(X, Y, i, hs);
    ulonglong2* A = a + ao;
    ulonglong2* R = rev + ao;
    i64 n_for = 0, n_rev = 0;
    while (hs > 0) {
        const i64 i = (i64)(Y[0] >> 32);
        const i64 j = kept_j[mo + i];
        const u64 p = X[0];
        const ulonglong2 m = mv[j];
        const i64 qpos = (i64)(m.y & 0xFFFFFFFFull), span = (i64)(m.x & 0xFF), seg = (i64)(m.y >> 32);
        int is_self = 0;
        if (!((flag & SD_F_SKIP) && sd_skip(flag, p, qpos, dg, dual_skip, n_dual, &is_self))) {
            if ((i64)(p & 1) == (qpos & 1))
                A[n_for++] = sd_anchor(p, qpos, span, seg, s_tan[j], is_self, ql, flag, ref_len);
            else
                R[n_rev++] = sd_anchor(p, qpos, span, seg, s_tan[j], is_self, ql, 0, ref_len);
        }
        const i64 o = (i64)(Y[0] & 0xFFFFFFFFull);
        if (o < s_n[j] - 1) {
            Y[0] += 1;
            X[0] = __ldg(pos + s_st[j] + o + 1);
        } else {
            X[0] = X[hs - 1];
            Y[0] = Y[hs - 1];
            --hs;
        }
        sd_minheap_down(X, Y, 0, hs);
    }
    for (i64 u = 0; u < n_rev; ++u) A[n_for + u] = R[u];
}
