// Suffix sorting of T = pac + revcomp(pac) by buckets (index/sufsort.py; numba twins there).
//
// The text is 2-bit packed, 32 bases a uint64, the first base in the high bits, zero words after the end
// (P[n/32 + 1] exists). A suffix's sort key for the window at text position q is 29 bases (58 bits) followed by
// 6 bits: min(n - q, 29), so that among equal bases a suffix that ends inside the window sorts first (it is a
// prefix of the other), and a key past the end of the text is 0.
//
// sx_hist:   counts of the first SX_BIN_BASES bases of every suffix (the buckets).
// sx_gather: the positions of the suffixes whose bucket lies in [lo, hi), grouped by bucket (any order inside).
// sx_keys:   the sort key of suffix pos[j] at depth off.
// sx_codes:  the pair code of suffix pos[j] (the two bases before it, fm.py's layout).

typedef unsigned long long u64;
typedef long long i64;

#ifndef SX_BIN_BASES
#define SX_BIN_BASES 6
#endif
#define SX_BINS (1 << (2 * SX_BIN_BASES))

__device__ __forceinline__ u64 sx_win(const u64* __restrict__ P, i64 q) {
    i64 w = q >> 5;
    int b = (int)(q & 31) * 2;
    u64 x = P[w] << b;
    if (b) x |= P[w + 1] >> (64 - b);
    return x;
}

__device__ __forceinline__ u64 sx_key_at(const u64* __restrict__ P, i64 n, i64 q) {
    i64 rem = n - q;
    if (rem <= 0) return 0ULL;
    return (sx_win(P, q) & ~0x3FULL) | (u64)(rem < 29 ? rem : 29);
}

__device__ __forceinline__ int sx_base(const u64* __restrict__ P, i64 q) {
    return (int)((P[q >> 5] >> (62 - 2 * (int)(q & 31))) & 3ULL);
}

extern "C" __global__ void sx_hist(const u64* __restrict__ P, i64 n, u64* __restrict__ hist) {
    __shared__ unsigned int h[SX_BINS];
    for (int i = threadIdx.x; i < SX_BINS; i += blockDim.x) h[i] = 0;
    __syncthreads();
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(&h[sx_win(P, i) >> (64 - 2 * SX_BIN_BASES)], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < SX_BINS; i += blockDim.x)
        if (h[i]) atomicAdd(&hist[i], (u64)h[i]);
}

extern "C" __global__ void sx_gather(const u64* __restrict__ P, i64 n, int lo, int hi, u64* __restrict__ cursor,
                                     i64* __restrict__ out) {
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int b = (int)(sx_win(P, i) >> (64 - 2 * SX_BIN_BASES));
        if (b >= lo && b < hi) out[atomicAdd(&cursor[b - lo], 1ULL)] = i;
    }
}

extern "C" __global__ void sx_keys(const u64* __restrict__ P, i64 n, const i64* __restrict__ pos, i64 m, i64 off,
                                   u64* __restrict__ out) {
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride)
        out[j] = sx_key_at(P, n, pos[j] + off);
}

// codes[j] = the pair code of the suffix at pos[j] (fm.py: the two bases before it; the one base T[0] for the suffix
// at 1, 0 for the suffix at 0)
extern "C" __global__ void sx_codes(const u64* __restrict__ P, const i64* __restrict__ pos, i64 m,
                                    unsigned char* __restrict__ codes) {
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
        i64 s = pos[j];
        int code = 0;
        if (s >= 2) code = sx_base(P, s - 2) * 4 + sx_base(P, s - 1);
        else if (s == 1) code = sx_base(P, 0);
        codes[j] = (unsigned char)code;
    }
}
