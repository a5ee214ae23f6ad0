/* random region sets through the dumped hit.c functions (test vectors for g3align) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mmpriv.h"

static uint64_t st = 88172645463325252ULL;
static uint32_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (uint32_t)(st >> 11); }
static int R(int n) { return (int)(rnd() % (uint32_t)n); }

static void gen(int n, mm_reg1_t *r, int with_p, int rich) {
	int i;
	memset(r, 0, n * sizeof(*r));
	for (i = 0; i < n; ++i) {
		mm_reg1_t *x = &r[i];
		x->id = i;
		x->cnt = rich && R(10) == 0? 0 : 1 + R(40);
		x->rid = R(3);
		x->score = 20 + R(400);
		x->qs = R(1000); x->qe = x->qs + 1 + R(1500);
		x->rs = R(5000); x->re = x->rs + 1 + R(1500);
		x->subsc = R(300);
		x->mlen = 1 + R(1000); x->blen = x->mlen + R(500);
		x->n_sub = R(4);
		x->score0 = x->score + R(50);
		x->rev = R(2);
		x->inv = rich && R(8) == 0;
		x->seg_split = R(6) == 0;
		x->is_alt = rich && R(6) == 0;
		x->strand_retained = R(3) == 0;
		x->hash = rnd();
		x->div = R(4) == 0? -1.0f : (float)R(1000) / 5000.0f;
		x->parent = i;
		if (with_p) {
			x->p = (mm_extra_t*)calloc(1, sizeof(mm_extra_t));
			x->p->dp_max = R(5) == 0? R(50) : 50 + R(800);
			x->p->dp_max2 = R(3) == 0? 0 : R(x->p->dp_max + 1);
			x->p->dp_score = x->p->dp_max - R(20);
		}
	}
	for (i = 0; i < n; ++i) if (R(2)) r[i].parent = R(i + 1); // parent before or itself
}
static void freep(int n, mm_reg1_t *r) { int i; for (i = 0; i < n; ++i) free(r[i].p), r[i].p = 0; }

int main(int argc, char *argv[]) {
	int it, n_it = argc > 1? atoi(argv[1]) : 1000;
	mm_reg1_t r[40];
	mm128_t a[64];
	mm_mapopt_t opt;
	mm_mapopt_init(&opt);
	for (it = 0; it < n_it; ++it) {
		int n = 1 + R(12), wp = R(2), k, i, qlens[2];
		float pr = (float)R(11) / 10.0f;
		gen(n, r, wp, 1);
		mm_set_mapq(0, n, r, 20 + R(30), 1 + R(2), R(3) == 0? 0 : R(2000), R(2));
		freep(n, r);
		gen(n, r, wp, 0); mm_sync_regs(0, n, r); k = mm_filter_strand_retained(n, r); freep(k, r);
		gen(n, r, wp, 0); k = n; mm_select_sub(0, pr, R(40), R(6), R(2), R(400), &k, r); freep(k, r);
		gen(n, r, wp, 0); k = n; qlens[0] = 100 + R(200); qlens[1] = 100 + R(200);
		mm_select_sub_multi(0, pr, 0.2f, 0.7f, 500 + R(500), R(40), R(6), 1 + R(2), qlens, &k, r); freep(k, r);
		gen(n, r, wp, 0); mm_set_parent(0, (float)R(11) / 10.0f, R(3) == 0? R(300) : 0x7fffffff, n, r, R(30), R(4) == 0, 0.15f); freep(n, r);
		gen(n, r, wp, 1); r[0].cnt = 1; k = n; mm_hit_sort(0, &k, r, 0.15f); freep(k, r);
		gen(n, r, wp, 1); k = n; opt.min_cnt = 1 + R(5); opt.min_chain_score = R(400); opt.min_dp_max = R(400); opt.max_clip_ratio = (float)R(10) / 10.0f;
		mm_filter_regs(&opt, 1500 + R(1000), &k, r); freep(k, r);
		/* split_reg on a random chain */
		gen(2, r, 0, 0);
		r[0].as = 0; r[0].cnt = 2 + R(60);
		for (i = 0; i < r[0].cnt; ++i) {
			a[i].x = (uint64_t)R(2) << 63 | (uint64_t)R(2) << 32 | (uint32_t)(1000 + i * 30 + R(20));
			a[i].y = (uint64_t)(15 + R(5)) << 32 | (uint32_t)(100 + i * 30 + R(20));
		}
		for (i = 0; i < r[0].cnt; ++i) a[i].x = (a[i].x & 0xffffffff00000000ULL) | (a[0].x & 0xffffffff00000000ULL) | (uint32_t)a[i].x;
		mm_split_reg(&r[0], &r[1], R(r[0].cnt + 2) - 1, 3000, a, R(2));
	}
	return 0;
}
