// Reference coordinates shared by kernels/*.cu (included; kernels/loader.py inlines it for NVRTC).
// Needs `i64` (long long) defined by the including file.
#pragma once

// bwa's bns_pos2rid on the contig table off[0..n_ctg]: contig of forward position pos_f, -1 past the end
__device__ __forceinline__ i64 pos2rid(const i64* off, i64 n_ctg, i64 l_pac, i64 pos_f) {
    if (pos_f >= l_pac) return -1;
    i64 left = 0, mid = 0, right = n_ctg;
    while (left < right) {
        mid = (left + right) >> 1;
        if (pos_f >= off[mid]) {
            if (mid == n_ctg - 1) break;
            if (pos_f < off[mid + 1]) break;
            left = mid + 1;
        } else {
            right = mid;
        }
    }
    return mid;
}
