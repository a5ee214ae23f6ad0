// Warp-synchronous code written once for three builds (kernels/ksw2.cu uses it).
//
// CUDA (nvcc, NVRTC): every lane of a warp is a thread. Code outside G3_LANES blocks is *uniform*: the 32
// lanes run it on equal values (so its stores write one value to one address). A G3_LANES block is the
// per-lane part: its body runs with `lane` = the lane index (0..31). Per-lane variables are declared with
// G3_LANE(type, name) and used as G3_L(name).
//
// Host C++, lock step (the tests' default, no GPU): one thread runs the whole warp. Uniform code runs once, a
// G3_LANES block is a loop over the 32 lanes, and a per-lane variable is an array of 32 indexed by `lane`.
// Lanes exchange values only through the collectives below or through memory between two G3_SYNC()s, so
// running the lanes one after another inside a block computes what the real warp computes.
//
// Host C++, G3_THREAD_WARP (tests/test_ksw2_gpu.py): a warp of 32 real threads that all run all the code, as
// on the GPU. A sync or a shuffle is a barrier at which every lane must come from the same source line
// (g3_meet checks it): a branch meant to be uniform that is not shows up as an error naming the lines.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define G3_REAL_WARP 1
#endif

#ifdef G3_REAL_WARP
#define G3_LANE(T, v) T v
#define G3_L(v) v
#define G3_LANES for (int lane = (int)(threadIdx.x & 31u), g3_once_ = 1; g3_once_; g3_once_ = 0)
#define G3_SYNC() __syncwarp()
// dst (per lane) = src of the lane below; lane 0 gets `first` (uniform)
#define G3_SHFL_UP1(dst, src, first)                                         \
    do {                                                                     \
        const auto g3_t_ = __shfl_up_sync(0xffffffffu, (src), 1);            \
        (dst) = (threadIdx.x & 31u) ? g3_t_ : (first);                       \
    } while (0)
// uniform u = src of lane k
#define G3_BCAST(u, src, k) ((u) = __shfl_sync(0xffffffffu, (src), (k)))
// uniform u = the largest src over the lanes (long long)
#define G3_MAX64(u, src)                                                     \
    do {                                                                     \
        long long g3_m_ = (src);                                             \
        for (int g3_o_ = 16; g3_o_ > 0; g3_o_ >>= 1) {                       \
            const long long g3_v_ = __shfl_xor_sync(0xffffffffu, g3_m_, g3_o_); \
            g3_m_ = g3_v_ > g3_m_ ? g3_v_ : g3_m_;                           \
        }                                                                    \
        (u) = g3_m_;                                                         \
    } while (0)
#elif defined(G3_THREAD_WARP)
// the shim defines g3_lane (thread_local), g3_x[32] and g3_meet(line)
#define G3_LANE(T, v) T v
#define G3_L(v) v
#define G3_LANES for (int lane = g3_lane, g3_once_ = 1; g3_once_; g3_once_ = 0)
#define G3_SYNC() g3_meet(__LINE__)
#define G3_SHFL_UP1(dst, src, first)                                         \
    do {                                                                     \
        g3_x[g3_lane] = (long long)(src);                                    \
        g3_meet(__LINE__);                                                   \
        const long long g3_t_ = g3_lane ? g3_x[g3_lane - 1] : (long long)(first); \
        g3_meet(__LINE__);                                                   \
        (dst) = (decltype(dst))g3_t_;                                        \
    } while (0)
#define G3_BCAST(u, src, k)                                                  \
    do {                                                                     \
        g3_x[g3_lane] = (long long)(src);                                    \
        g3_meet(__LINE__);                                                   \
        const long long g3_t_ = g3_x[k];                                     \
        g3_meet(__LINE__);                                                   \
        (u) = (decltype(u))g3_t_;                                            \
    } while (0)
#define G3_MAX64(u, src)                                                     \
    do {                                                                     \
        g3_x[g3_lane] = (long long)(src);                                    \
        g3_meet(__LINE__);                                                   \
        long long g3_m_ = g3_x[0];                                           \
        for (int g3_l_ = 1; g3_l_ < 32; ++g3_l_) g3_m_ = g3_x[g3_l_] > g3_m_ ? g3_x[g3_l_] : g3_m_; \
        g3_meet(__LINE__);                                                   \
        (u) = g3_m_;                                                         \
    } while (0)
#else
#define G3_LANE(T, v) T v[32]
#define G3_L(v) v[lane]
#define G3_LANES for (int lane = 0; lane < 32; ++lane)
#define G3_SYNC() ((void)0)
#define G3_SHFL_UP1(dst, src, first)                                         \
    do {                                                                     \
        for (int g3_l_ = 31; g3_l_ >= 0; --g3_l_) (dst)[g3_l_] = g3_l_ ? (src)[g3_l_ - 1] : (first); \
    } while (0)
#define G3_BCAST(u, src, k) ((u) = (src)[k])
#define G3_MAX64(u, src)                                                     \
    do {                                                                     \
        long long g3_m_ = (src)[0];                                          \
        for (int g3_l_ = 1; g3_l_ < 32; ++g3_l_) g3_m_ = (src)[g3_l_] > g3_m_ ? (src)[g3_l_] : g3_m_; \
        (u) = g3_m_;                                                         \
    } while (0)
#endif

// CUDA's byte-wise SIMD intrinsics for the host builds (kernels/ksw2.cu's four cells per lane): each byte of the
// result is the operation on the signed bytes of a and b, wrapped to 8 bits; __byte_perm picks bytes of (y:x).
#ifndef G3_REAL_WARP
#define G3_V4(name, expr)                                                     \
    static inline unsigned name(unsigned a, unsigned b) {                     \
        unsigned r = 0;                                                       \
        for (int k = 0; k < 4; ++k) {                                         \
            const int x = (signed char)(a >> (8 * k)), y = (signed char)(b >> (8 * k)); \
            r |= ((unsigned)(expr) & 0xFFu) << (8 * k);                       \
        }                                                                     \
        return r;                                                             \
    }
G3_V4(__vadd4, x + y)
G3_V4(__vsub4, x - y)
G3_V4(__vmaxs4, x > y ? x : y)
G3_V4(__vmins4, x < y ? x : y)
G3_V4(__vcmpgts4, x > y ? 0xFF : 0)
G3_V4(__vcmpges4, x >= y ? 0xFF : 0)
G3_V4(__vcmpeq4, x == y ? 0xFF : 0)
#undef G3_V4
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int k = 0; k < 4; ++k) r |= (unsigned)((v >> (8 * ((s >> (4 * k)) & 7))) & 0xFFu) << (8 * k);
    return r;
}
#endif
