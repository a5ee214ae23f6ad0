/* random anchor sets through the dumped chaining functions (test vectors for g3align) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mmpriv.h"

static uint64_t st = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (uint32_t)(st >> 11); }
static int R(int n) { return (int)(rnd() % (uint32_t)n); }

int main(int argc, char *argv[]) {
	int it, n_it = argc > 1? atoi(argv[1]) : 100;
	for (it = 0; it < n_it; ++it) {
		int64_t n = 20 + R(400), i, k;
		int n_u, n_seg = 1 + (R(4) == 0), is_cdna = R(5) == 0;
		uint64_t *u;
		mm128_t *a = (mm128_t*)malloc(n * sizeof(mm128_t));
		int n_diag = 1 + R(6), span = 10 + R(10);
		for (i = 0; i < n; ++i) {
			int d = R(n_diag), rev = d & 1, rid = R(8) == 0, noise = R(4) == 0;
			int q = R(3000), r = q + d * 700 + (noise? R(2000) : R(30));
			if (R(6) == 0 && i > 0) r = (int32_t)a[i-1].x; /* equal positions */
			a[i].x = (uint64_t)rev << 63 | (uint64_t)rid << 32 | (uint32_t)(r < 0? 0 : r);
			a[i].y = (uint64_t)(n_seg > 1? (q >= 1500) : 0) << 48 | (uint64_t)span << 32 | (uint32_t)q;
		}
		radix_sort_128x(a, a + n);
		if (R(2)) {
			mm128_t *b = mg_lchain_dp(R(3) == 0? 100 : 5000, R(3) == 0? 100 : 5000, 20 + R(500), R(30), 5 + R(100), 1 + R(4), R(60),
									  0.01f * R(200), 0.01f * R(20), is_cdna, n_seg, n, a, &n_u, &u, 0);
			free(b); free(u);
		} else {
			mm128_t *b = mg_lchain_rmq(R(3) == 0? 100 : 5000, R(3) == 0? 0 : 50 + R(2000), 20 + R(1000), R(30), 5 + R(50), 1 + R(4), R(60),
									   0.01f * R(200), 0.01f * R(20), n, a, &n_u, &u, 0);
			free(b); free(u);
		}
		k = 0; (void)k;
	}
	return 0;
}
