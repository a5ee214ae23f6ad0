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

// ------------------------------------------------------------------------------------------------
// The reference's minimizers for the index build, in pieces (index/mmidx.py _sketch_all's GPU side).
//
// One thread per piece (contig r, warm-up start i0, start s, end e; positions from the contig's
// start): the sketch runs over [i0, s) without emitting (a warm-up that rebuilds the state at s;
// none for a contig's first piece), its state at s is stored in S0, then it runs over [s, e)
// emitting into out[cap_off[p] ...] (at most cap_off[p+1] - cap_off[p] records; cnt[p] = how many
// there are) and its state at the end goes to S1. A port of _sketch_run line for line, with the
// state in _sketch_run's layout (sw words a piece: 11 scalars, the window's hashes and positions,
// the homopolymer run ring of 32), so that the host checks each piece's S0 against the S1 before
// it (_same_state) and sketches again, on the CPU, the few that differ or overflowed.
// y = rid << 32 | (pos << 1 & 0xffffffff) | strand, as minimap2's index stores it.
// ------------------------------------------------------------------------------------------------

struct MMRun {
    u64 kf, kr, min_x, min_y;
    long long l, span, bpos, mpos, qf, qc, i;
    u64 bx[MM_W], by[MM_W];
    long long runs[32];
};

__device__ __forceinline__ void mm_run_fresh(MMRun& R)
{
    R.kf = R.kr = 0;
    R.min_x = R.min_y = MM_MAX;
    R.l = R.span = R.bpos = R.mpos = R.qf = R.qc = R.i = 0;
#pragma unroll
    for (int j = 0; j < MM_W; ++j) R.bx[j] = R.by[j] = MM_MAX;
    for (int j = 0; j < 32; ++j) R.runs[j] = 0;
}

__device__ void mm_run_save(const MMRun& R, u64* S)
{
    S[0] = R.kf; S[1] = R.kr; S[2] = (u64)R.l; S[3] = (u64)R.span; S[4] = R.min_x; S[5] = R.min_y;
    S[6] = (u64)R.bpos; S[7] = (u64)R.mpos; S[8] = (u64)R.qf; S[9] = (u64)R.qc; S[10] = (u64)R.i;
    for (int j = 0; j < MM_W; ++j) {
        S[11 + j] = R.bx[j];
        S[11 + MM_W + j] = R.by[j];
    }
    for (int j = 0; j < 32; ++j) S[11 + 2 * MM_W + j] = (u64)R.runs[j];  // zeros without MM_HPC
}

// Byte reader of the reference pieces: one read-only byte load a base (seq carries no padding).
struct LdgReader {
    const unsigned char* seq;
    __device__ __forceinline__ unsigned get(long long p) { return __ldg(seq + p); }
};

// _sketch_run over positions [i0, i_stop) of seq[st, en), emitting at positions >= i_emit (and the
// last minimum when i_stop reaches the end) into out[0, cap) with n counting every record; the bases come
// from rd.get(position in seq). One loop serves both the reads (mm_sketch_one) and the reference pieces.
template <class Reader>
__device__ void mm_run(Reader& rd, long long st, long long en, long long i0, long long i_emit, long long i_stop,
                       u64 rid, MMRun& R, ulonglong2* out, long long cap, long long& n)
{
    const long long length = en - st;
    if (length <= 0) return;
    const u64 shift1 = 2 * (MM_K - 1);
    const u64 mask = (1ull << (2 * MM_K)) - 1;
    const u64 ridsh = rid << 32;
    const long long wk1 = MM_W + MM_K - 1;
    u64 kf = R.kf, kr = R.kr, min_x = R.min_x, min_y = R.min_y;
    long long l = R.l, span = R.span, bpos = R.bpos, mpos = R.mpos, q_front = R.qf, q_count = R.qc;
    long long i = i0;
    while (i < i_stop) {
        const bool emit = i >= i_emit;
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
            R.runs[(q_count + q_front) & 31] = run;
            ++q_count;
            span += run;
            if (q_count > MM_K) {
                span -= R.runs[q_front];
                q_front = (q_front + 1) & 31;
                --q_count;
            }
#else
            span = l + 1 < MM_K ? l + 1 : MM_K;
#endif
            const u64 cu = c;
            kf = ((kf << 2) | cu) & mask;
            kr = (kr >> 2) | ((3ull ^ cu) << shift1);
            if (kf == kr) {  // palindromic k-mer: not a candidate, no window step
                ++i;
                continue;
            }
            const u64 z = kf < kr ? 0 : 1;
            ++l;
            if (l >= MM_K && span < 256) {
                ix = (mm_hash64(z ? kr : kf, mask) << 8) | (u64)span;
                iy = ridsh | ((((u64)i & 0xFFFFFFFFull) << 1) & 0xFFFFFFFFull) | z;
            }
        } else {
            l = 0;
            q_count = 0;
            q_front = 0;
            span = 0;
        }
        R.bx[bpos] = ix;
        R.by[bpos] = iy;
        if (l == wk1 && min_x != MM_MAX && emit) {
            for (int j = bpos + 1; j < MM_W; ++j)
                if (R.bx[j] == min_x && R.by[j] != min_y) mm_push(out, cap, n, R.bx[j], R.by[j]);
            for (int j = 0; j < bpos; ++j)
                if (R.bx[j] == min_x && R.by[j] != min_y) mm_push(out, cap, n, R.bx[j], R.by[j]);
        }
        if (ix <= min_x) {
            if (l >= MM_W + MM_K && min_x != MM_MAX && emit) mm_push(out, cap, n, min_x, min_y);
            min_x = ix;
            min_y = iy;
            mpos = bpos;
        } else if (bpos == mpos) {
            if (l >= wk1 && min_x != MM_MAX && emit) mm_push(out, cap, n, min_x, min_y);
            min_x = MM_MAX;
            for (int j = bpos + 1; j < MM_W; ++j)
                if (min_x >= R.bx[j]) {
                    min_x = R.bx[j];
                    min_y = R.by[j];
                    mpos = j;
                }
            for (int j = 0; j <= bpos; ++j)
                if (min_x >= R.bx[j]) {
                    min_x = R.bx[j];
                    min_y = R.by[j];
                    mpos = j;
                }
            if (l >= wk1 && min_x != MM_MAX && emit) {
                for (int j = bpos + 1; j < MM_W; ++j)
                    if (R.bx[j] == min_x && R.by[j] != min_y) mm_push(out, cap, n, R.bx[j], R.by[j]);
                for (int j = 0; j <= bpos; ++j)
                    if (R.bx[j] == min_x && R.by[j] != min_y) mm_push(out, cap, n, R.bx[j], R.by[j]);
            }
        }
        if (++bpos == MM_W) bpos = 0;
        ++i;
    }
    if (i_stop >= length && min_x != MM_MAX) mm_push(out, cap, n, min_x, min_y);
    R.kf = kf; R.kr = kr; R.min_x = min_x; R.min_y = min_y;
    R.l = l; R.span = span; R.bpos = bpos; R.mpos = mpos; R.qf = q_front; R.qc = q_count; R.i = i;
}

extern "C" __global__ void __launch_bounds__(128) mm_ref_pieces(const unsigned char* __restrict__ seq,
                                                                const long long* __restrict__ ref_off,
                                                                const long long* __restrict__ pc, long long n_pieces,
                                                                const long long* __restrict__ cap_off,
                                                                ulonglong2* __restrict__ out,
                                                                long long* __restrict__ cnt, u64* __restrict__ S0,
                                                                u64* __restrict__ S1, long long sw)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_pieces) return;
    const long long r = pc[4 * p], i0 = pc[4 * p + 1], s = pc[4 * p + 2], e = pc[4 * p + 3];
    const long long st = ref_off[r], en = ref_off[r + 1];
    const long long cap = cap_off[p + 1] - cap_off[p];
    ulonglong2* buf = out + cap_off[p];
    LdgReader rd{seq};
    MMRun R;
    mm_run_fresh(R);
    // phase 0, the warm-up over [i0, s): nothing emitted (every position is below i_emit = s), state to S0
    // (none for a contig's first piece); phase 1, [s, e) emitting, state to S1. One call site: one inlined copy.
    for (int ph = i0 < s ? 0 : 1; ph < 2; ++ph) {
        long long n = 0;
        mm_run(rd, st, en, ph ? s : i0, s, ph ? e : s, (u64)r, R, buf, ph ? cap : 0, n);
        mm_run_save(R, (ph ? S1 : S0) + p * sw);
        if (ph) cnt[p] = n;
    }
}

// Minimizers of one read, seq[st, en) -> out[0, cap) (rid 0, everything emitted); returns how many there are
// (may exceed cap). The bases come as aligned 64-bit words (ByteReader).
__device__ long long mm_sketch_one(const unsigned char* seq, long long st, long long en, ulonglong2* out,
                                   long long cap)
{
    ByteReader rd;
    rd.words = reinterpret_cast<const u64*>(seq);
    rd.cur = -1;
    rd.v = 0;
    MMRun R;
    mm_run_fresh(R);
    long long n = 0;
    mm_run(rd, st, en, 0, 0, en - st, 0ull, R, out, cap, n);
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
