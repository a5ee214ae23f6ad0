// Chaining for `g3align mem` on the GPU: bwa's mem_chain + mem_chain_flt + the chain windows of
// mem_chain2aln, one thread per read; exactly aligner/memstage.chain_range (the numba twin, through
// chain.chain_seeds, kbtree.py, ksort.py, extend.chain_window).
//
// chain_kernel: read r's seeds are [s_off[r], s_off[r+1]) of s_rbeg/s_qbeg/s_len/s_rid (GPU seeding's
//   output, already filtered to one contig). It builds the chains in seed order through an emulation of
//   bwa's chain B-tree (klib kbtree, t = 5: with equal keys the answer depends on the node layout),
//   weighs them, sorts them by weight with klib's introsort (unstable: the swap sequence decides ties),
//   filters them (mem_chain_flt) and writes the kept chains into the read's slots [s_off[r], ...):
//   sl_rid, sl_r0/sl_r1 (reference window), sl_n (seeds), and their seeds (indices into the read's
//   seeds) into sl_seed. n_ch[r] / n_cs[r]: kept chains / their seeds. cpu[r] = 1 when the read needs
//   mem_flt_chained_seeds (long reads: it aligns seeds with SW), which stays on the CPU twin.
//   Scratch: int32 words [scr_off[r], scr_off[r+1]) of scr, at least chain_scratch_words(n) of them.
// chain_compact_kernel: the kept chains in read order (c_off, g_off: exclusive scans of n_ch, n_cs) ->
//   ch_rid, cs_off, ch_seed and the extension job list (memext.cu mem_ext_kernel's j_* arrays).
typedef long long i64;

#include "bns.cuh"

// CP (int32): w, max_chain_gap, min_chain_weight, min_seed_len, max_chain_extend, a, o_del, e_del, o_ins, e_ins
#define CP_W 0
#define CP_GAP 1
#define CP_MINW 2
#define CP_MINSEED 3
#define CP_MAXEXT 4
#define CP_A 5
#define CP_ODEL 6
#define CP_EDEL 7
#define CP_OINS 8
#define CP_EINS 9

// reads with more chains than this (weight kept) are filtered by a warp (chain_flt_warp_kernel): mem_chain_flt
// compares each chain with every kept one, and one thread took milliseconds for a read in a repeat with hundreds
// of chains. Host builds (tests: one emulated thread at a time) keep every read on the serial path.
#ifndef FLT_WARP_MIN
#if defined(__CUDACC__)
#define FLT_WARP_MIN 32
#else
#define FLT_WARP_MIN 0x7fffffff
#endif
#endif

#define KB_T 5
#define KB_MAXK (2 * KB_T - 1)

__device__ __forceinline__ int kb_nodes(int n) {
    int m = n / (KB_T - 1) + 4;
    return m > 4 ? m : 4;
}

// int32 words of scratch for a read with n seeds (memstage.chain_scratch_words computes the same)
__device__ __forceinline__ i64 chain_scratch_words(i64 n) {
    return 17 * n + 8 + 21 * (i64)kb_nodes((int)n);
}

__device__ __forceinline__ int cmp64(i64 a, i64 b) { return (a > b) - (a < b); }

// kbtree emulation (aligner/mem/kbtree.py): keys are chain ids, the key of chain c is rb[first[c]]
struct Tree {
    int* nkey;
    int* internal;
    int* keys;  // [node * KB_MAXK + i]
    int* ptr;   // [node * (KB_MAXK + 1) + i]
    int n_nodes, root;
    const i64* rb;
    const int* first;
    __device__ i64 pos(int c) const { return rb[first[c]]; }
};

// __kb_getp_aux: index i and r = cmp(k, key[i])
__device__ void kb_getp(const Tree& t, int x, i64 k, int& oi, int& orr) {
    int n = t.nkey[x];
    if (n == 0) {
        oi = -1;
        orr = 0;
        return;
    }
    int begin = 0, end = n;
    while (begin < end) {
        int mid = (begin + end) >> 1;
        if (cmp64(t.pos(t.keys[x * KB_MAXK + mid]), k) < 0) begin = mid + 1;
        else end = mid;
    }
    if (begin == n) {
        oi = n - 1;
        orr = 1;
        return;
    }
    int r = cmp64(k, t.pos(t.keys[x * KB_MAXK + begin]));
    if (r < 0) --begin;
    oi = begin;
    orr = r;
}

// kb_intervalp's lower: a chain id or -1
__device__ int kb_lower(const Tree& t, i64 k) {
    int x = t.root, lower = -1;
    while (x >= 0) {
        int i, r;
        kb_getp(t, x, k, i, r);
        if (i >= 0 && r == 0) return t.keys[x * KB_MAXK + i];
        if (i >= 0) lower = t.keys[x * KB_MAXK + i];
        if (t.internal[x] == 0) return lower;
        x = t.ptr[x * (KB_MAXK + 1) + i + 1];
    }
    return lower;
}

__device__ int kb_alloc(Tree& t, int is_internal) {
    int z = t.n_nodes++;
    t.nkey[z] = 0;
    t.internal[z] = is_internal;
    return z;
}

__device__ void kb_split(Tree& t, int x, int i, int y) {
    int z = kb_alloc(t, t.internal[y]);
    t.nkey[z] = KB_T - 1;
    for (int j = 0; j < KB_T - 1; ++j) t.keys[z * KB_MAXK + j] = t.keys[y * KB_MAXK + KB_T + j];
    if (t.internal[y])
        for (int j = 0; j < KB_T; ++j) t.ptr[z * (KB_MAXK + 1) + j] = t.ptr[y * (KB_MAXK + 1) + KB_T + j];
    t.nkey[y] = KB_T - 1;
    for (int j = t.nkey[x]; j > i; --j) t.ptr[x * (KB_MAXK + 1) + j + 1] = t.ptr[x * (KB_MAXK + 1) + j];
    t.ptr[x * (KB_MAXK + 1) + i + 1] = z;
    for (int j = t.nkey[x] - 1; j >= i; --j) t.keys[x * KB_MAXK + j + 1] = t.keys[x * KB_MAXK + j];
    t.keys[x * KB_MAXK + i] = t.keys[y * KB_MAXK + KB_T - 1];
    t.nkey[x] += 1;
}

// kb_putp of chain id cid
__device__ void kb_put(Tree& t, int cid) {
    int r = t.root;
    if (t.nkey[r] == KB_MAXK) {
        int s = kb_alloc(t, 1);
        t.root = s;
        t.ptr[s * (KB_MAXK + 1)] = r;
        kb_split(t, s, 0, r);
        r = s;
    }
    i64 k = t.pos(cid);
    int x = r;
    while (true) {
        int i, rr;
        kb_getp(t, x, k, i, rr);
        if (t.internal[x] == 0) {
            for (int j = t.nkey[x] - 1; j > i; --j) t.keys[x * KB_MAXK + j + 1] = t.keys[x * KB_MAXK + j];
            t.keys[x * KB_MAXK + i + 1] = cid;
            t.nkey[x] += 1;
            return;
        }
        ++i;
        int c = t.ptr[x * (KB_MAXK + 1) + i];
        if (t.nkey[c] == KB_MAXK) {
            kb_split(t, x, i, c);
            if (cmp64(k, t.pos(t.keys[x * KB_MAXK + i])) > 0) ++i;
        }
        x = t.ptr[x * (KB_MAXK + 1) + i];
    }
}

// in-order chain ids (__kb_traverse); returns the count
__device__ int kb_traverse(const Tree& t, int* out) {
    int sx[64], si[64];
    int sp = 0, m = 0;
    sx[0] = t.root;
    si[0] = 0;
    while (true) {
        while (sx[sp] >= 0 && si[sp] <= t.nkey[sx[sp]]) {
            int x = sx[sp];
            sx[sp + 1] = t.internal[x] ? t.ptr[x * (KB_MAXK + 1) + si[sp]] : -1;
            si[sp + 1] = 0;
            ++sp;
        }
        --sp;
        if (sp >= 0) {
            int x = sx[sp];
            if (x >= 0 && si[sp] < t.nkey[x]) out[m++] = t.keys[x * KB_MAXK + si[sp]];
            si[sp] += 1;
        } else {
            break;
        }
    }
    return m;
}

// ksort introsort of idx[0:n] (aligner/mem/ksort.py), "less" = heavier chain: lt(a, b) = w[a] > w[b]
__device__ __forceinline__ bool w_lt(const int* w, int a, int b) { return w[a] > w[b]; }

__device__ void w_insertsort(int* idx, int s, int t, const int* w) {
    for (int i = s + 1; i < t; ++i)
        for (int j = i; j > s && w_lt(w, idx[j], idx[j - 1]); --j) {
            int tmp = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = tmp;
        }
}

__device__ void w_combsort(int* idx, int s, int n, const int* w) {
    const double shrink = 1.2473309501039786540366528676643;
    int gap = n;
    bool do_swap;
    do {
        if (gap > 2) {
            gap = (int)(gap / shrink);
            if (gap == 9 || gap == 10) gap = 11;
        }
        do_swap = false;
        for (int i = s; i < s + n - gap; ++i) {
            int j = i + gap;
            if (w_lt(w, idx[j], idx[i])) {
                int tmp = idx[i];
                idx[i] = idx[j];
                idx[j] = tmp;
                do_swap = true;
            }
        }
    } while (do_swap || gap > 2);
    if (gap != 1) w_insertsort(idx, s, s + n, w);
}

__device__ void w_introsort(int* idx, int n, const int* w) {
    if (n < 1) return;
    if (n == 2) {
        if (w_lt(w, idx[1], idx[0])) {
            int tmp = idx[0];
            idx[0] = idx[1];
            idx[1] = tmp;
        }
        return;
    }
    int d = 2;
    while ((1 << d) < n) ++d;
    int stl[128], str_[128], std_[128];
    int top = 0, s = 0, t = n - 1;
    d <<= 1;
    while (true) {
        if (s < t) {
            if (--d == 0) {
                w_combsort(idx, s, t - s + 1, w);
                t = s;
                continue;
            }
            int i = s, j = t, k = i + ((j - i) >> 1) + 1;
            if (w_lt(w, idx[k], idx[i])) {
                if (w_lt(w, idx[k], idx[j])) k = j;
            } else {
                k = w_lt(w, idx[j], idx[i]) ? i : j;
            }
            int rp = idx[k];
            if (k != t) {
                int tmp = idx[k];
                idx[k] = idx[t];
                idx[t] = tmp;
            }
            while (true) {
                ++i;
                while (w_lt(w, idx[i], rp)) ++i;
                --j;
                while (i <= j && w_lt(w, rp, idx[j])) --j;
                if (j <= i) break;
                int tmp = idx[i];
                idx[i] = idx[j];
                idx[j] = tmp;
            }
            int tmp = idx[i];
            idx[i] = idx[t];
            idx[t] = tmp;
            if (i - s > t - i) {
                if (i - s > 16) {
                    stl[top] = s;
                    str_[top] = i - 1;
                    std_[top] = d;
                    ++top;
                }
                s = t - i > 16 ? i + 1 : t;
            } else {
                if (t - i > 16) {
                    stl[top] = i + 1;
                    str_[top] = t;
                    std_[top] = d;
                    ++top;
                }
                t = i - s > 16 ? i - 1 : s;
            }
        } else {
            if (top == 0) {
                w_insertsort(idx, 0, n, w);
                return;
            }
            --top;
            s = stl[top];
            t = str_[top];
            d = std_[top];
        }
    }
}

// bwa's test_and_merge (no merge of the seed list: the caller records it): 0 new chain, 1 contained, 2 merged
__device__ int test_and_merge(int w, int max_gap, i64 l_pac, int f, int la, const i64* rb, const int* qb,
                              const int* ln, int p) {
    i64 qend = qb[la] + ln[la], rend = rb[la] + ln[la];
    if (qb[p] >= qb[f] && qb[p] + ln[p] <= qend && rb[p] >= rb[f] && rb[p] + ln[p] <= rend) return 1;
    if ((rb[la] < l_pac || rb[f] < l_pac) && rb[p] >= l_pac) return 0;
    i64 x = (i64)qb[p] - qb[la], y = rb[p] - rb[la];
    if (y >= 0 && x - y <= w && y - x <= w && x - ln[la] < max_gap && y - ln[la] < max_gap) return 2;
    return 0;
}

// min(query coverage, reference coverage) of seeds sd[0:m] (mem_chain_weight)
__device__ int chain_weight(const int* sd, int m, const i64* rb, const int* qb, const int* ln) {
    i64 w = 0, end = 0;
    for (int j = 0; j < m; ++j) {
        int s = sd[j];
        i64 b = qb[s], e = b + ln[s];
        if (b >= end) w += ln[s];
        else if (e > end) w += e - end;
        if (e > end) end = e;
    }
    i64 tmp = w;
    w = 0;
    end = 0;
    for (int j = 0; j < m; ++j) {
        int s = sd[j];
        i64 b = rb[s], e = b + ln[s];
        if (b >= end) w += ln[s];
        else if (e > end) w += e - end;
        if (e > end) end = e;
    }
    if (tmp < w) w = tmp;
    return (int)(w < (1 << 30) ? w : (1 << 30) - 1);
}

__device__ __forceinline__ i64 cal_max_gap(const int* P, i64 qlen) {
    int l_del = (int)((double)(qlen * P[CP_A] - P[CP_ODEL]) / P[CP_EDEL] + 1.);
    int l_ins = (int)((double)(qlen * P[CP_A] - P[CP_OINS]) / P[CP_EINS] + 1.);
    int l = l_del > l_ins ? l_del : l_ins;
    l = l > 1 ? l : 1;
    return l < (P[CP_W] << 1) ? l : (P[CP_W] << 1);
}

// mem_chain2aln's reference window of the chain with seeds sd[0:m], clipped like bns_fetch_seq
__device__ void chain_window(const int* P, const i64* off, i64 n_ctg, i64 l_pac, i64 L, const i64* rb,
                             const int* qb, const int* ln, const int* sd, int m, i64& r0, i64& r1) {
    i64 rmax0 = l_pac << 1, rmax1 = 0;
    for (int i = 0; i < m; ++i) {
        int t = sd[i];
        i64 b = rb[t] - (qb[t] + cal_max_gap(P, qb[t]));
        i64 rest = L - qb[t] - ln[t];
        i64 e = rb[t] + ln[t] + (rest + cal_max_gap(P, rest));
        if (b < rmax0) rmax0 = b;
        if (e > rmax1) rmax1 = e;
    }
    if (rmax0 < 0) rmax0 = 0;
    if (rmax1 > (l_pac << 1)) rmax1 = l_pac << 1;
    i64 mid = rb[sd[0]];
    if (rmax0 < l_pac && l_pac < rmax1) {
        if (mid < l_pac) rmax1 = l_pac;
        else rmax0 = l_pac;
    }
    // clip_to_contig
    if (rmax1 < rmax0) {
        i64 tmp = rmax0;
        rmax0 = rmax1;
        rmax1 = tmp;
    }
    int is_rev = mid >= l_pac;
    i64 pf = is_rev ? (l_pac << 1) - 1 - mid : mid;
    i64 rid = pos2rid(off, n_ctg, l_pac, pf);
    i64 far_beg = off[rid], far_end = off[rid + 1];
    if (is_rev) {
        i64 tmp = far_beg;
        far_beg = (l_pac << 1) - far_end;
        far_end = (l_pac << 1) - tmp;
    }
    if (rmax0 < far_beg) rmax0 = far_beg;
    if (rmax1 > far_end) rmax1 = far_end;
    r0 = rmax0;
    r1 = rmax1;
}

// mem_chain_flt's kept chains (chain_kernel's scratch), in keep order k: chains[k] the chain's index in weight
// order, kcb/kce its query span, kwk its weight, kfs the first chain it shadows (-1: none yet)
struct ChainFlt {
    int *chains, *kcb, *kce, *kwk, *kfs;
};

// chain i (weight order) kept as the k-th: kept[i] = 2 when it overlaps a kept chain largely, else 3
__device__ __forceinline__ void flt_keep(const ChainFlt& f, const int* cb, const int* ce, const int* wk, int* kept,
                                         int k, int i, int large) {
    f.chains[k] = i;
    f.kcb[k] = cb[i];
    f.kce[k] = ce[i];
    f.kwk[k] = wk[i];
    f.kfs[k] = -1;
    kept[i] = large ? 2 : 3;
}

// mem_chain_flt's test of chain (cbi, cei) of weight wi against the k-th kept chain: 1 when they overlap largely,
// 2 when the kept one also drops it, 0 otherwise
__device__ __forceinline__ int flt_test(const ChainFlt& f, int k, int cbi, int cei, int wi, float mask_level,
                                        float drop_ratio, int max_gap, int min2) {
    const int cbj = f.kcb[k], cej = f.kce[k];
    const int b_max = cbj > cbi ? cbj : cbi;
    const int e_min = cej < cei ? cej : cei;
    if (e_min <= b_max) return 0;
    const int li = cei - cbi, lj = cej - cbj;
    const int min_l = li < lj ? li : lj;
    if (!((float)(e_min - b_max) >= (float)min_l * mask_level && min_l < max_gap)) return 0;
    const int wj = f.kwk[k];
    return (float)wi < (float)wj * drop_ratio && wj - wi >= min2 ? 2 : 1;
}

// mem_chain_flt (reads with a seed on an ALT contig go to the CPU twin: is_alt = 0 here) over the nk > 0 chains in weight order; returns the kept count
__device__ int flt_serial(const ChainFlt& f, const int* cb, const int* ce, const int* wk, int* kept, int nk,
                          const int* P, float mask_level, float drop_ratio) {
    const int max_gap = P[CP_GAP], min2 = P[CP_MINSEED] << 1;
    flt_keep(f, cb, ce, wk, kept, 0, 0, 0);
    int n_keep = 1;
    for (int i = 1; i < nk; ++i) {
        const int cbi = cb[i], cei = ce[i], wi = wk[i];
        int large_ovlp = 0, k = 0;
        for (; k < n_keep; ++k) {
            const int t = flt_test(f, k, cbi, cei, wi, mask_level, drop_ratio, max_gap, min2);
            if (t) {
                large_ovlp = 1;
                if (f.kfs[k] < 0) f.kfs[k] = i;
                if (t == 2) break;
            }
        }
        if (k == n_keep) flt_keep(f, cb, ce, wk, kept, n_keep++, i, large_ovlp);
    }
    return n_keep;
}

// after mem_chain_flt: the shadowed chains kept too, at most max_chain_extend extended beyond the first kept, and
// the kept chains (windows, seeds) into read r's slots, as the twin's chain_range
__device__ void chain_finish(const int* P, const i64* ctg_off, i64 n_ctg, i64 l_pac, i64 L, const i64* rb,
                             const int* qb, const int* ln, const int* c_rid, const int* cs, const int* cnt,
                             const int* sid, int* kept, const ChainFlt& f, int n_keep, int nk, i64 base,
                             i64* sl_rid, i64* sl_r0, i64* sl_r1, i64* sl_n, i64* sl_seed, i64* n_ch, i64* n_cs,
                             i64 r) {
    if (nk > 0) {
        for (int k = 0; k < n_keep; ++k)
            if (f.kfs[k] >= 0) kept[f.kfs[k]] = 1;
        int k = 0, i = 0;
        for (; i < nk; ++i) {
            if (!(kept[i] == 0 || kept[i] == 3)) {
                if (++k >= P[CP_MAXEXT]) break;
            }
        }
        for (; i < nk; ++i)
            if (kept[i] < 3) kept[i] = 0;
    }
    int m = 0, g = 0;
    for (int i = 0; i < nk; ++i) {
        if (kept[i] == 0) continue;
        int c = sid[i];
        int ns = cnt[c + 1] - cnt[c];
        i64 r0, r1;
        chain_window(P, ctg_off, n_ctg, l_pac, L, rb, qb, ln, cs + cnt[c], ns, r0, r1);
        sl_rid[base + m] = c_rid[c];
        sl_r0[base + m] = r0;
        sl_r1[base + m] = r1;
        sl_n[base + m] = ns;
        for (int j = 0; j < ns; ++j) sl_seed[base + g + j] = cs[cnt[c] + j];
        g += ns;
        ++m;
    }
    n_ch[r] = m;
    n_cs[r] = g;
}

extern "C" __global__ void chain_kernel(
    const i64* __restrict__ seq_off, const i64* __restrict__ s_off, const i64* __restrict__ s_rbeg,
    const int* __restrict__ s_qbeg, const int* __restrict__ s_len, const int* __restrict__ s_rid,
    const i64* __restrict__ ctg_off, i64 n_ctg, i64 l_pac, const int* __restrict__ P, float mask_level,
    float drop_ratio, i64 n_reads, const i64* __restrict__ scr_off, int* __restrict__ scr,
    i64* __restrict__ sl_rid, i64* __restrict__ sl_r0, i64* __restrict__ sl_r1, i64* __restrict__ sl_n,
    i64* __restrict__ sl_seed, i64* __restrict__ n_ch, i64* __restrict__ n_cs, int* __restrict__ cpu,
    int* __restrict__ pend, int* __restrict__ n_pend, const signed char* __restrict__ ctg_alt, i64 n_alt) {
    i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_reads) return;
    n_ch[r] = 0;
    n_cs[r] = 0;
    cpu[r] = 0;
    const i64 L = seq_off[r + 1] - seq_off[r];
    if (L < P[CP_MINSEED]) return;
    {  // mem_flt_chained_seeds returns at once unless min_l <= 0.05 L: otherwise the CPU twin runs the read
        double min_l = P[CP_MINW] ? 1.1 * P[CP_MINW] : (double)5.5f * log((double)L);
        if (!(min_l > (double)0.05f * L + 1e-6 * (1.0 + min_l))) {
            cpu[r] = 1;
            return;
        }
    }
    const i64 base = s_off[r];
    const int n = (int)(s_off[r + 1] - base);
    if (n == 0) return;
    // a seed on an ALT contig (PREFIX.alt): mem_chain_flt's ALT rule is the CPU twin's (chain_seeds)
    for (int p = 0; p < n && n_alt > 0; ++p) {
        const int c = s_rid[base + p];
        if (c >= 0 && c < n_alt && ctg_alt[c]) {
            cpu[r] = 1;
            return;
        }
    }
    const i64* rb = s_rbeg + base;
    const int* qb = s_qbeg + base;
    const int* ln = s_len + base;
    const int* rid = s_rid + base;
    int* z = scr + scr_off[r];
    int* seed_chain = z;
    int* first = z + n;
    int* last = z + 2 * n;
    int* c_rid = z + 3 * n;
    int* order = z + 4 * n;
    int* cnt = z + 5 * n;      // n + 1
    int* cs = z + 6 * n + 1;
    int* fill = z + 7 * n + 1;
    int* w = z + 8 * n + 1;
    int* ids = z + 9 * n + 1;
    int* perm = z + 10 * n + 1;
    int* kept = z + 11 * n + 1;
    int* firstsh = z + 12 * n + 1;
    int* cb = z + 13 * n + 1;
    int* ce = z + 14 * n + 1;
    int* chains = z + 15 * n + 1;
    int* wk = z + 16 * n + 1;   // weights in sorted order
    int* tz = z + 17 * n + 8;
    const int nodes = kb_nodes(n);
    Tree t;
    t.nkey = tz;
    t.internal = tz + nodes;
    t.keys = tz + 2 * nodes;
    t.ptr = tz + 2 * nodes + KB_MAXK * nodes;
    t.n_nodes = 1;
    t.root = 0;
    t.rb = rb;
    t.first = first;
    t.nkey[0] = 0;
    t.internal[0] = 0;
    // mem_chain: seeds in order, each offered to the closest chain at or left of it
    const int wband = P[CP_W], max_gap = P[CP_GAP];
    int nc = 0;
    for (int p = 0; p < n; ++p) {
        seed_chain[p] = -1;
        bool to_add = true;
        if (nc > 0) {
            int c = kb_lower(t, rb[p]);
            if (c >= 0) {
                int res = rid[p] != c_rid[c] ? 0 : test_and_merge(wband, max_gap, l_pac, first[c], last[c], rb, qb, ln, p);
                if (res > 0) {
                    to_add = false;
                    if (res == 2) {
                        seed_chain[p] = c;
                        last[c] = p;
                    }
                }
            }
        }
        if (to_add) {
            int c = nc++;
            first[c] = last[c] = p;
            c_rid[c] = rid[p];
            seed_chain[p] = c;
            kb_put(t, c);
        }
    }
    kb_traverse(t, order);
    // seeds per chain id, insertion order
    for (int c = 0; c <= nc; ++c) cnt[c] = 0;
    for (int p = 0; p < n; ++p)
        if (seed_chain[p] >= 0) cnt[seed_chain[p] + 1] += 1;
    for (int c = 0; c < nc; ++c) cnt[c + 1] += cnt[c];
    for (int c = 0; c < nc; ++c) fill[c] = cnt[c];
    for (int p = 0; p < n; ++p) {
        int c = seed_chain[p];
        if (c >= 0) cs[fill[c]++] = p;
    }
    // weights in tree order, light chains dropped, then by weight (introsort)
    int nk = 0;
    for (int i = 0; i < nc; ++i) {
        int c = order[i];
        int wc = chain_weight(cs + cnt[c], cnt[c + 1] - cnt[c], rb, qb, ln);
        if (wc >= P[CP_MINW]) {
            ids[nk] = c;
            w[nk] = wc;
            ++nk;
        }
    }
    for (int i = 0; i < nk; ++i) perm[i] = i;
    w_introsort(perm, nk, w);
    // ids/w permuted: chain i of the sorted list is ids[perm[i]]
    for (int i = 0; i < nk; ++i) {
        wk[i] = w[perm[i]];
        fill[i] = ids[perm[i]];
    }
    int* sid = fill;
    for (int i = 0; i < nk; ++i) {
        int c = sid[i];
        int f = cs[cnt[c]], la = cs[cnt[c + 1] - 1];
        cb[i] = qb[f];
        ce[i] = qb[la] + ln[la];
        kept[i] = 0;
        firstsh[i] = -1;
    }
    // mem_chain_flt's arrays, in keep order: the kept chains' sorted indices, query spans, weights and first
    // shadowed chain (w, ids and perm are free once the sort is applied)
    ChainFlt f = {chains, w, ids, perm, firstsh};
    if (nk > FLT_WARP_MIN) {  // left to chain_flt_warp_kernel, which finds the read's state in its scratch
#if defined(__CUDACC__)
        z[17 * n + 1] = nk;
        pend[atomicAdd(n_pend, 1)] = (int)r;
#endif
        return;
    }
    int n_keep = nk > 0 ? flt_serial(f, cb, ce, wk, kept, nk, P, mask_level, drop_ratio) : 0;
    chain_finish(P, ctg_off, n_ctg, l_pac, L, rb, qb, ln, c_rid, cs, cnt, sid, kept, f, n_keep, nk, base, sl_rid,
                 sl_r0, sl_r1, sl_n, sl_seed, n_ch, n_cs, r);
}

#if defined(__CUDACC__)
// mem_chain_flt of the reads chain_kernel left in pend[0, *n_pend), one warp per read (grid-stride), then the
// read's slots as chain_kernel writes them (lane 0). Same results as flt_serial: chain i is compared with the
// kept chains 32 at a time; the first that drops it (lowest index) ends the comparison, and only the kept
// chains up to it record i as their first shadowed chain, as the serial loop does.
extern "C" __global__ void chain_flt_warp_kernel(
    const i64* __restrict__ seq_off, const i64* __restrict__ s_off, const i64* __restrict__ s_rbeg,
    const int* __restrict__ s_qbeg, const int* __restrict__ s_len, const int* __restrict__ s_rid,
    const i64* __restrict__ ctg_off, i64 n_ctg, i64 l_pac, const int* __restrict__ P, float mask_level,
    float drop_ratio, const i64* __restrict__ scr_off, int* __restrict__ scr, i64* __restrict__ sl_rid,
    i64* __restrict__ sl_r0, i64* __restrict__ sl_r1, i64* __restrict__ sl_n, i64* __restrict__ sl_seed,
    i64* __restrict__ n_ch, i64* __restrict__ n_cs, const int* __restrict__ pend, const int* __restrict__ n_pend) {
    const int lane = threadIdx.x & 31;
    const int np = *n_pend;
    const int n_warps = (gridDim.x * blockDim.x) >> 5;
    for (int wi = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; wi < np; wi += n_warps) {
        const i64 r = pend[wi];
        const i64 L = seq_off[r + 1] - seq_off[r];
        const i64 base = s_off[r];
        const int n = (int)(s_off[r + 1] - base);
        const i64* rb = s_rbeg + base;
        const int* qb = s_qbeg + base;
        const int* ln = s_len + base;
        int* z = scr + scr_off[r];
        int* c_rid = z + 3 * n;
        int* cnt = z + 5 * n;
        int* cs = z + 6 * n + 1;
        int* sid = z + 7 * n + 1;
        ChainFlt f = {z + 15 * n + 1, z + 8 * n + 1, z + 9 * n + 1, z + 10 * n + 1, z + 12 * n + 1};
        int* kept = z + 11 * n + 1;
        int* cb = z + 13 * n + 1;
        int* ce = z + 14 * n + 1;
        int* wk = z + 16 * n + 1;
        const int nk = z[17 * n + 1];
        const float mask = mask_level, drop = drop_ratio;
        const int max_gap = P[CP_GAP], min2 = P[CP_MINSEED] << 1;
        if (lane == 0) flt_keep(f, cb, ce, wk, kept, 0, 0, 0);
        __syncwarp();
        int n_keep = 1;
        for (int i = 1; i < nk; ++i) {
            const int cbi = cb[i], cei = ce[i], wi_ = wk[i];
            int large = 0, brk = -1;
            for (int k0 = 0; k0 < n_keep && brk < 0; k0 += 32) {
                const int k = k0 + lane;
                int ov = 0, br = 0;
                if (k < n_keep) {
                    const int t = flt_test(f, k, cbi, cei, wi_, mask, drop, max_gap, min2);
                    ov = t != 0;
                    br = t == 2;
                }
                const unsigned mb = __ballot_sync(0xffffffffu, br);
                const int last = mb ? k0 + __ffs(mb) - 1 : 0x7fffffff;  // the first kept chain that drops i
                if (ov && k <= last) {
                    if (f.kfs[k] < 0) f.kfs[k] = i;
                }
                large |= __any_sync(0xffffffffu, ov && k <= last);
                if (mb) brk = last;
            }
            if (brk < 0) {  // i is kept
                if (lane == 0) flt_keep(f, cb, ce, wk, kept, n_keep, i, large);
                ++n_keep;
            }
            __syncwarp();
        }
        if (lane == 0)
            chain_finish(P, ctg_off, n_ctg, l_pac, L, rb, qb, ln, c_rid, cs, cnt, sid, kept, f, n_keep, nk, base,
                         sl_rid, sl_r0, sl_r1, sl_n, sl_seed, n_ch, n_cs, r);
        __syncwarp();
    }
}
#endif

// The kept chains in read order (c_off/g_off: exclusive scans of n_ch/n_cs over the reads, read_base:
// the first read's index in the batch) -> ch_rid, cs_off (without its last entry), ch_seed and the jobs.
extern "C" __global__ void chain_compact_kernel(
    const i64* __restrict__ s_off, const i64* __restrict__ s_rbeg, const int* __restrict__ s_qbeg,
    const int* __restrict__ s_len, const i64* __restrict__ c_off, const i64* __restrict__ g_off, i64 n_reads,
    i64 read_base, const i64* __restrict__ sl_rid, const i64* __restrict__ sl_r0, const i64* __restrict__ sl_r1,
    const i64* __restrict__ sl_n, const i64* __restrict__ sl_seed, i64* __restrict__ ch_rid,
    i64* __restrict__ cs_off, i64* __restrict__ ch_seed, i64* __restrict__ j_read, i64* __restrict__ j_sq,
    i64* __restrict__ j_sr, i64* __restrict__ j_sl, i64* __restrict__ j_r0, i64* __restrict__ j_r1) {
    i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_reads) return;
    const i64 base = s_off[r];
    i64 g = g_off[r];
    i64 k = 0;
    for (i64 c = c_off[r]; c < c_off[r + 1]; ++c) {
        i64 sl = base + (c - c_off[r]);
        ch_rid[c] = sl_rid[sl];
        cs_off[c] = g;
        for (i64 j = 0; j < sl_n[sl]; ++j, ++g, ++k) {
            i64 ls = sl_seed[base + k];
            ch_seed[g] = ls;
            j_read[g] = read_base + r;
            j_sq[g] = s_qbeg[base + ls];
            j_sr[g] = s_rbeg[base + ls];
            j_sl[g] = s_len[base + ls];
            j_r0[g] = sl_r0[sl];
            j_r1[g] = sl_r1[sl];
        }
    }
}
