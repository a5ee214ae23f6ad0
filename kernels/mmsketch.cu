// Minimizer extraction for a batch of reads (minimap2 2.24 mm_sketch).
//
// Byte-identical to the CPU twin index/mmidx.py:sketch_into with rid = 0 (what
// aligner/map/seed.py:collect_minimizers gives for a one-segment read):
//   x = hash64(canonical k-mer, mask) << 8 | span,  y = (pos << 1 & 0xffffffff) | strand.
// Invertible hash restricted to 2k bits, homopolymer compression (MM_HPC), symmetric k-mers
// skipped (no window step), span capped (span >= 256 is no candidate), window of MM_W candidates
// with minimap2's emission of equal-hash ties.
//
// Thread mapping: one thread per read (reads are long: 1-100 kb; a warp would have to serialise the
// window anyway).  The launcher may hand a permutation `reads` (longest first) to balance warps.
// Bases are read as aligned 64-bit words through the read-only path (one load per 8 bases); the
// launcher pads `seq` to a multiple of 8 bytes and keeps it 8-byte aligned.
//
// Output: read r writes its minimizers to out[base[r] ...], at most cap[r] of them, and stores the
// full count in count[r] (when count is not null).  Pass 1 uses slots of 2*len/(w+1)+16 records;
// reads with count > cap are re-run (pass 3) straight into the final CSR (base = off, cap = count).
// mm_compact (pass 2) copies the slots into the CSR, one warp per read.
//
// Compile-time constants (prepended by kernels/loader.py): MM_K (1..28), MM_W (1..255), MM_HPC (0/1).

#ifndef MM_K
#define MM_K 15
#endif
#ifndef MM_W
#define MM_W 10
#endif
#ifndef MM_HPC
#define MM_HPC 0
#endif

typedef unsigned long long u64;

#define MM_MAX 0xFFFFFFFFFFFFFFFFull

__device__ __forceinline__ u64 mm_hash64(u64 key, u64 mask)
{
    key = (~key + (key << 21)) & mask;
    key = key ^ (key >> 24);
    key = ((key + (key << 3)) + (key << 8)) & mask;
    key = key ^ (key >> 14);
    key = ((key + (key << 2)) + (key << 4)) & mask;
    key = key ^ (key >> 28);
    key = (key + (key << 31)) & mask;
    return key;
}

// Forward reader over the packed bytes: one 64-bit word cached (all accesses are monotone).
struct ByteReader {
    const u64* words;
    long long cur;
    u64 v;
    __device__ __forceinline__ unsigned get(long long p)
    {
        long long wi = p >> 3;
        if (wi != cur) {
            cur = wi;
            v = __ldg(words + wi);
        }
        return (unsigned)(v >> ((p & 7) * 8)) & 0xffu;
    }
};

__device__ __forceinline__ void mm_push(ulonglong2* out, long long cap, long long& n, u64 x, u64 y)
{
    if (n < cap) out[n] = make_ulonglong2(x, y);
    ++n;
}

// Minimizers of seq[st, en) -> out[0, cap); returns how many there are (may exceed cap).
__device__ long long mm_sketch_one(const unsigned char* seq, long long st, long long en, ulonglong2* out,
                                   long long cap)
{
    const long long length = en - st;
    if (length <= 0) return 0;
    const u64 shift1 = 2 * (MM_K - 1);
    const u64 mask = (1ull << (2 * MM_K)) - 1;
    const long long wk1 = MM_W + MM_K - 1;
    ByteReader rd;
    rd.words = reinterpret_cast<const u64*>(seq);
    rd.cur = -1;
    rd.v = 0;
    u64 bx[MM_W], by[MM_W];
#pragma unroll
    for (int j = 0; j < MM_W; ++j) {
        bx[j] = MM_MAX;
        by[j] = MM_MAX;
    }
#if MM_HPC
    long long runs[32];  // homopolymer run lengths of the current k-mer (ring)
    int q_front = 0, q_count = 0;
#endif
    u64 kf = 0, kr = 0, min_x = MM_MAX, min_y = MM_MAX;
    long long span = 0, l = 0, n = 0;
    int bpos = 0, mpos = 0;
    for (long long i = 0; i < length; ++i) {
        const unsigned c = rd.get(st + i);
        u64 ix = MM_MAX, iy = MM_MAX;
        if (c < 4) {
#if MM_HPC
            long long run = 1;
            if (i + 1 < length && rd.get(st + i + 1) == c) {
                run = 2;
                while (i + run < length && rd.get(st + i + run) == c) ++run;
                i += run - 1;
            }
            runs[(q_count + q_front) & 31] = run;
            ++q_count;
            span += run;
            if (q_count > MM_K) {
                span -= runs[q_front];
                q_front = (q_front + 1) & 31;
                --q_count;
            }
#else
            span = l + 1 < MM_K ? l + 1 : MM_K;
#endif
            const u64 cu = c;
            kf = ((kf << 2) | cu) & mask;
            kr = (kr >> 2) | ((3ull ^ cu) << shift1);
            if (kf == kr) continue;  // symmetric k-mer: not a candidate, no window step
            const u64 z = kf < kr ? 0 : 1;
            ++l;
            if (l >= MM_K && span < 256) {
                ix = (mm_hash64(z ? kr : kf, mask) << 8) | (u64)span;
                iy = (((u64)i << 1) & 0xFFFFFFFFull) | z;
            }
        } else {
            l = 0;
            span = 0;
#if MM_HPC
            q_count = 0;
            q_front = 0;
#endif
        }
        bx[bpos] = ix;
        by[bpos] = iy;
        if (l == wk1 && min_x != MM_MAX) {
            // first full window: equal-hash k-mers seen before the minimum was fixed
            for (int j = bpos + 1; j < MM_W; ++j)
                if (bx[j] == min_x && by[j] != min_y) mm_push(out, cap, n, bx[j], by[j]);
            for (int j = 0; j < bpos; ++j)
                if (bx[j] == min_x && by[j] != min_y) mm_push(out, cap, n, bx[j], by[j]);
        }
        if (ix <= min_x) {
            if (l >= MM_W + MM_K && min_x != MM_MAX) mm_push(out, cap, n, min_x, min_y);
            min_x = ix;
            min_y = iy;
            mpos = bpos;
        } else if (bpos == mpos) {
            // the minimum left the window: emit it and rescan (oldest first, ties -> the latest)
            if (l >= wk1 && min_x != MM_MAX) mm_push(out, cap, n, min_x, min_y);
            min_x = MM_MAX;
            for (int j = bpos + 1; j < MM_W; ++j)
                if (min_x >= bx[j]) {
                    min_x = bx[j];
                    min_y = by[j];
                    mpos = j;
                }
            for (int j = 0; j <= bpos; ++j)
                if (min_x >= bx[j]) {
                    min_x = bx[j];
                    min_y = by[j];
                    mpos = j;
                }
            if (l >= wk1 && min_x != MM_MAX) {
                for (int j = bpos + 1; j < MM_W; ++j)
                    if (bx[j] == min_x && by[j] != min_y) mm_push(out, cap, n, bx[j], by[j]);
                for (int j = 0; j <= bpos; ++j)
                    if (bx[j] == min_x && by[j] != min_y) mm_push(out, cap, n, bx[j], by[j]);
            }
        }
        if (++bpos == MM_W) bpos = 0;
    }
    if (min_x != MM_MAX) mm_push(out, cap, n, min_x, min_y);
    return n;
}

// Thread t sketches read r = reads ? reads[t] : t into out[base[r] ...] (cap[r] records at most);
// count[r] = its number of minimizers when count is not null.
extern "C" __global__ void __launch_bounds__(128) mm_sketch(const unsigned char* __restrict__ seq,
                                                            const long long* __restrict__ seq_off,
                                                            const long long* __restrict__ reads, long long n_reads,
                                                            const long long* __restrict__ base,
                                                            const long long* __restrict__ cap,
                                                            ulonglong2* __restrict__ out,
                                                            long long* __restrict__ count)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_reads) return;
    const long long r = reads ? reads[t] : t;
    const long long n = mm_sketch_one(seq, seq_off[r], seq_off[r + 1], out + base[r], cap[r]);
    if (count) count[r] = n;
}

// One warp per read: slot[base[r], base[r] + count[r]) -> out[off[r], ...) when count[r] <= cap[r].
extern "C" __global__ void mm_compact(const ulonglong2* __restrict__ slot, const long long* __restrict__ base,
                                      const long long* __restrict__ cap, const long long* __restrict__ count,
                                      const long long* __restrict__ off, long long n_reads,
                                      ulonglong2* __restrict__ out)
{
    const long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (r >= n_reads) return;
    const long long n = count[r];
    if (n > cap[r]) return;
    const ulonglong2* src = slot + base[r];
    ulonglong2* dst = out + off[r];
    for (long long j = lane; j < n; j += 32) dst[j] = src[j];
}
