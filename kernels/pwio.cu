// Pairwise engine input and output on the GPU (aligner/pairwise/pwio.py; CPU twins there, same names without "pw_"):
//   pw_encode_text  sequences joined by '\n' (ASCII text) -> CSR codes 0..4, invalid characters located
//   pw_unpack2      2-bit packed bases -> codes 0..3
//   pw_gather_runs  per pair, cnt[p] words from src + src_off[p] -> dst + dst_off[p] (CIGAR compaction)
typedef unsigned char u8;

// ASCII -> code: A C G T (either case) 0..3, the IUPAC codes N R Y K M S W B D H V (either case) 4, else 255
__device__ __forceinline__ u8 base_code(u8 c)
{
    switch (c | 0x20) {                 // lower case (letters only; others never match below)
    case 'a': return 0;
    case 'c': return 1;
    case 'g': return 2;
    case 't': return 3;
    case 'n': case 'r': case 'y': case 'k': case 'm': case 's': case 'w': case 'b': case 'd': case 'h': case 'v':
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ? 4 : 255;
    default: return 255;
    }
}

// One warp per sequence k: text[start[k] .. start[k] + len) -> codes[off[k] ..], where start[k] = off[k] + k
// (one separator byte after each sequence).  bad[0] receives the smallest text position of an invalid
// character (atomicMin; the caller sets it to the text length first).
extern "C" __global__ void __launch_bounds__(256)
pw_encode_text(const u8* __restrict__ text, const long long* __restrict__ off, int nseq, u8* __restrict__ codes,
               unsigned long long* bad)
{
    const int lane = threadIdx.x & 31;
    const long long k = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (k >= nseq) return;
    const long long a = off[k], b = off[k + 1], s = a + k;
    unsigned long long first = ~0ull;
    for (long long i = lane; i < b - a; i += 32) {
        const u8 c = base_code(text[s + i]);
        codes[a + i] = c;
        if (c == 255 && (unsigned long long)(s + i) < first) first = s + i;
    }
    for (int d = 16; d; d >>= 1) {
        const unsigned long long o = __shfl_down_sync(0xffffffffu, first, d);
        first = o < first ? o : first;
    }
    if (lane == 0 && first != ~0ull) atomicMin(bad, first);
}

// codes[i] = base (shift + i) of the packed array (4 bases a byte, base j in bits 2*(j & 3) of byte j >> 2)
extern "C" __global__ void __launch_bounds__(256)
pw_unpack2(const u8* __restrict__ packed, long long shift, long long n, u8* __restrict__ codes)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long j = shift + i;
        codes[i] = (packed[j >> 2] >> (2 * (j & 3))) & 3;
    }
}

// One thread per pair (CIGARs are short next to the DP): dst[dst_off[p] + k] = src[src_off[p] + k], k < cnt[p]
extern "C" __global__ void __launch_bounds__(256)
pw_gather_runs(const unsigned* __restrict__ src, const long long* __restrict__ src_off, const int* __restrict__ cnt,
               int cnt_stride, const long long* __restrict__ dst_off, unsigned* __restrict__ dst, int G)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= G) return;
    const unsigned* s = src + src_off[p];
    unsigned* d = dst + dst_off[p];
    const int c = cnt[(long long)p * cnt_stride];
    for (int k = 0; k < c; k++) d[k] = s[k];
}
