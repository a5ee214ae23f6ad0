/* Test-vector dumps for g3align (not part of any project file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mmpriv.h"

static FILE *mmh_fp = 0;
static int mmh_init = 0;
static FILE *fp_(void) {
	if (!mmh_init) { const char *s = getenv("MMH_DUMP"); mmh_init = 1; if (s) mmh_fp = fopen(s, "wb"); }
	return mmh_fp;
}
static void w64(int64_t v) { fwrite(&v, 8, 1, mmh_fp); }
static void wd(double v) { fwrite(&v, 8, 1, mmh_fp); }
static void hdr(int fid, int phase, int n, int n_par, int64_t n_a, int64_t n_u) {
	w64(0x4D4D4844); w64(fid); w64(phase); w64(n); w64(n_par); w64(n_a); w64(n_u);
}
static void wregs(int n, const mm_reg1_t *r) {
	int i;
	for (i = 0; i < n; ++i) {
		const mm_reg1_t *x = &r[i];
		union { float f; int32_t i; } d; d.f = x->div;
		int64_t v[37] = { x->id, x->cnt, x->rid, x->score, x->qs, x->qe, x->rs, x->re, x->parent, x->subsc, x->as, x->mlen, x->blen,
			x->n_sub, x->score0, x->mapq, x->split, x->rev, x->inv, x->sam_pri, x->proper_frag, x->pe_thru, x->seg_split, x->seg_id,
			x->split_inv, x->is_alt, x->strand_retained, x->hash, d.i, x->p != 0, x->p? x->p->dp_score : 0, x->p? x->p->dp_max : 0,
			x->p? x->p->dp_max2 : 0, x->p? x->p->n_ambi : 0, x->p? x->p->trans_strand : 0, x->p? x->p->n_cigar : 0, 0 };
		fwrite(v, 8, 37, mmh_fp);
	}
}
static void wa(int64_t n, const mm128_t *a) { int64_t i; for (i = 0; i < n; ++i) { fwrite(&a[i].x, 8, 1, mmh_fp); fwrite(&a[i].y, 8, 1, mmh_fp); } }
static void wu(int64_t n, const uint64_t *u) { if (n > 0) fwrite(u, 8, n, mmh_fp); }
static int64_t a_extent(int n, const mm_reg1_t *r) { int i; int64_t m = 0; for (i = 0; i < n; ++i) if (r[i].as + r[i].cnt > m) m = r[i].as + r[i].cnt; return m; }

void mmh_read_start(const char *qname, int qlen_sum) {
	if (!fp_()) return;
	int l = strlen(qname);
	hdr(0, 0, 0, 1, l, 0); wd(qlen_sum); fwrite(qname, 1, l, mmh_fp);
}

/* fid: 1 set_parent 2 hit_sort 3 set_sam_pri 4 sync_regs 5 select_sub 6 filter_strand_retained 7 filter_regs 8 squeeze_a
 * 9 split_reg 10 set_mapq 11 est_err 12 select_sub_multi 13 gen_regs 14 lchain_dp 15 lchain_rmq */
mm_reg1_t *mm_gen_regs_orig(void *km, uint32_t hash, int qlen, int n_u, uint64_t *u, mm128_t *a, int is_qstrand);
mm_reg1_t *mm_gen_regs(void *km, uint32_t hash, int qlen, int n_u, uint64_t *u, mm128_t *a, int is_qstrand) {
	mm_reg1_t *r = mm_gen_regs_orig(km, hash, qlen, n_u, u, a, is_qstrand);
	if (fp_()) {
		int64_t i, n_a = 0;
		for (i = 0; i < n_u; ++i) n_a += (int32_t)u[i];
		hdr(13, 0, 0, 3, n_a, n_u); wd(hash); wd(qlen); wd(is_qstrand); wa(n_a, a); wu(n_u, u);
		hdr(13, 1, n_u, 0, 0, 0); wregs(n_u, r);
	}
	return r;
}
void mm_split_reg_orig(mm_reg1_t *r, mm_reg1_t *r2, int n, int qlen, mm128_t *a, int is_qstrand);
void mm_split_reg(mm_reg1_t *r, mm_reg1_t *r2, int n, int qlen, mm128_t *a, int is_qstrand) {
	if (fp_()) { hdr(9, 0, 2, 3, r->cnt, 0); wd(n); wd(qlen); wd(is_qstrand); wregs(1, r); wregs(1, r2); wa(r->cnt, a + r->as); }
	mm_split_reg_orig(r, r2, n, qlen, a, is_qstrand);
	if (fp_()) { hdr(9, 1, 2, 0, 0, 0); wregs(1, r); wregs(1, r2); }
}
void mm_set_parent_orig(void *km, float mask_level, int mask_len, int n, mm_reg1_t *r, int sub_diff, int hard_mask_level, float alt_diff_frac);
void mm_set_parent(void *km, float mask_level, int mask_len, int n, mm_reg1_t *r, int sub_diff, int hard_mask_level, float alt_diff_frac) {
	if (fp_()) { hdr(1, 0, n, 5, 0, 0); wd(mask_level); wd(mask_len); wd(sub_diff); wd(hard_mask_level); wd(alt_diff_frac); wregs(n, r); }
	mm_set_parent_orig(km, mask_level, mask_len, n, r, sub_diff, hard_mask_level, alt_diff_frac);
	if (fp_()) { hdr(1, 1, n, 0, 0, 0); wregs(n, r); }
}
void mm_hit_sort_orig(void *km, int *n_regs, mm_reg1_t *r, float alt_diff_frac);
void mm_hit_sort(void *km, int *n_regs, mm_reg1_t *r, float alt_diff_frac) {
	if (fp_()) { hdr(2, 0, *n_regs, 1, 0, 0); wd(alt_diff_frac); wregs(*n_regs, r); }
	mm_hit_sort_orig(km, n_regs, r, alt_diff_frac);
	if (fp_()) { hdr(2, 1, *n_regs, 0, 0, 0); wregs(*n_regs, r); }
}
int mm_set_sam_pri_orig(int n, mm_reg1_t *r);
int mm_set_sam_pri(int n, mm_reg1_t *r) {
	int ret;
	if (fp_()) { hdr(3, 0, n, 0, 0, 0); wregs(n, r); }
	ret = mm_set_sam_pri_orig(n, r);
	if (fp_()) { hdr(3, 1, n, 1, 0, 0); wd(ret); wregs(n, r); }
	return ret;
}
void mm_sync_regs_orig(void *km, int n_regs, mm_reg1_t *regs);
void mm_sync_regs(void *km, int n_regs, mm_reg1_t *regs) {
	if (fp_()) { hdr(4, 0, n_regs, 0, 0, 0); wregs(n_regs, regs); }
	mm_sync_regs_orig(km, n_regs, regs);
	if (fp_()) { hdr(4, 1, n_regs, 0, 0, 0); wregs(n_regs, regs); }
}
void mm_select_sub_orig(void *km, float pri_ratio, int min_diff, int best_n, int check_strand, int min_strand_sc, int *n_, mm_reg1_t *r);
void mm_select_sub(void *km, float pri_ratio, int min_diff, int best_n, int check_strand, int min_strand_sc, int *n_, mm_reg1_t *r) {
	if (fp_()) { hdr(5, 0, *n_, 5, 0, 0); wd(pri_ratio); wd(min_diff); wd(best_n); wd(check_strand); wd(min_strand_sc); wregs(*n_, r); }
	mm_select_sub_orig(km, pri_ratio, min_diff, best_n, check_strand, min_strand_sc, n_, r);
	if (fp_()) { hdr(5, 1, *n_, 0, 0, 0); wregs(*n_, r); }
}
int mm_filter_strand_retained_orig(int n_regs, mm_reg1_t *r);
int mm_filter_strand_retained(int n_regs, mm_reg1_t *r) {
	int k;
	if (fp_()) { hdr(6, 0, n_regs, 0, 0, 0); wregs(n_regs, r); }
	k = mm_filter_strand_retained_orig(n_regs, r);
	if (fp_()) { hdr(6, 1, k, 0, 0, 0); wregs(k, r); }
	return k;
}
void mm_filter_regs_orig(const mm_mapopt_t *opt, int qlen, int *n_regs, mm_reg1_t *regs);
void mm_filter_regs(const mm_mapopt_t *opt, int qlen, int *n_regs, mm_reg1_t *regs) {
	if (fp_()) { hdr(7, 0, *n_regs, 5, 0, 0); wd(opt->min_cnt); wd(opt->min_chain_score); wd(opt->min_dp_max); wd(opt->max_clip_ratio); wd(qlen); wregs(*n_regs, regs); }
	mm_filter_regs_orig(opt, qlen, n_regs, regs);
	if (fp_()) { hdr(7, 1, *n_regs, 0, 0, 0); wregs(*n_regs, regs); }
}
int mm_squeeze_a_orig(void *km, int n_regs, mm_reg1_t *regs, mm128_t *a);
int mm_squeeze_a(void *km, int n_regs, mm_reg1_t *regs, mm128_t *a) {
	int ret;
	if (fp_()) { int64_t e = a_extent(n_regs, regs); hdr(8, 0, n_regs, 0, e, 0); wregs(n_regs, regs); wa(e, a); }
	ret = mm_squeeze_a_orig(km, n_regs, regs, a);
	if (fp_()) { hdr(8, 1, n_regs, 1, ret, 0); wd(ret); wregs(n_regs, regs); wa(ret, a); }
	return ret;
}
void mm_set_mapq_orig(void *km, int n_regs, mm_reg1_t *regs, int min_chain_sc, int match_sc, int rep_len, int is_sr);
void mm_set_mapq(void *km, int n_regs, mm_reg1_t *regs, int min_chain_sc, int match_sc, int rep_len, int is_sr) {
	if (fp_()) { hdr(10, 0, n_regs, 4, 0, 0); wd(min_chain_sc); wd(match_sc); wd(rep_len); wd(is_sr); wregs(n_regs, regs); }
	mm_set_mapq_orig(km, n_regs, regs, min_chain_sc, match_sc, rep_len, is_sr);
	if (fp_()) { hdr(10, 1, n_regs, 0, 0, 0); wregs(n_regs, regs); }
}
void mm_est_err_orig(const mm_idx_t *mi, int qlen, int n_regs, mm_reg1_t *regs, const mm128_t *a, int32_t n, const uint64_t *mini_pos);
void mm_est_err(const mm_idx_t *mi, int qlen, int n_regs, mm_reg1_t *regs, const mm128_t *a, int32_t n, const uint64_t *mini_pos) {
	if (fp_()) {
		int64_t e = a_extent(n_regs, regs); uint32_t i;
		hdr(11, 0, n_regs, 1 + mi->n_seq, e, n); wd(qlen); for (i = 0; i < mi->n_seq; ++i) wd(mi->seq[i].len);
		wregs(n_regs, regs); wa(e, a); wu(n, mini_pos);
	}
	mm_est_err_orig(mi, qlen, n_regs, regs, a, n, mini_pos);
	if (fp_()) { hdr(11, 1, n_regs, 0, 0, 0); wregs(n_regs, regs); }
}
void mm_select_sub_multi_orig(void *km, float pri_ratio, float pri1, float pri2, int max_gap_ref, int min_diff, int best_n, int n_segs, const int *qlens, int *n_, mm_reg1_t *r);
void mm_select_sub_multi(void *km, float pri_ratio, float pri1, float pri2, int max_gap_ref, int min_diff, int best_n, int n_segs, const int *qlens, int *n_, mm_reg1_t *r) {
	if (fp_()) { hdr(12, 0, *n_, 9, 0, 0); wd(pri_ratio); wd(pri1); wd(pri2); wd(max_gap_ref); wd(min_diff); wd(best_n); wd(n_segs); wd(qlens[0]); wd(n_segs > 1? qlens[1] : 0); wregs(*n_, r); }
	mm_select_sub_multi_orig(km, pri_ratio, pri1, pri2, max_gap_ref, min_diff, best_n, n_segs, qlens, n_, r);
	if (fp_()) { hdr(12, 1, *n_, 0, 0, 0); wregs(*n_, r); }
}
mm128_t *mg_lchain_dp_orig(int max_dist_x, int max_dist_y, int bw, int max_skip, int max_iter, int min_cnt, int min_sc, float chn_pen_gap, float chn_pen_skip,
					  int is_cdna, int n_seg, int64_t n, mm128_t *a, int *n_u_, uint64_t **_u, void *km);
mm128_t *mg_lchain_dp(int max_dist_x, int max_dist_y, int bw, int max_skip, int max_iter, int min_cnt, int min_sc, float chn_pen_gap, float chn_pen_skip,
					  int is_cdna, int n_seg, int64_t n, mm128_t *a, int *n_u_, uint64_t **_u, void *km) {
	mm128_t *b;
	int64_t i, n_v = 0;
	if (fp_()) { hdr(14, 0, 0, 11, n, 0); wd(max_dist_x); wd(max_dist_y); wd(bw); wd(max_skip); wd(max_iter); wd(min_cnt); wd(min_sc); wd(chn_pen_gap); wd(chn_pen_skip); wd(is_cdna); wd(n_seg); wa(n, a); }
	b = mg_lchain_dp_orig(max_dist_x, max_dist_y, bw, max_skip, max_iter, min_cnt, min_sc, chn_pen_gap, chn_pen_skip, is_cdna, n_seg, n, a, n_u_, _u, km);
	if (fp_()) { for (i = 0; i < *n_u_; ++i) n_v += (int32_t)(*_u)[i]; hdr(14, 1, 0, 0, n_v, *n_u_); wa(n_v, b); wu(*n_u_, *_u); }
	return b;
}
mm128_t *mg_lchain_rmq_orig(int max_dist, int max_dist_inner, int bw, int max_chn_skip, int cap_rmq_size, int min_cnt, int min_sc, float chn_pen_gap, float chn_pen_skip,
					   int64_t n, mm128_t *a, int *n_u_, uint64_t **_u, void *km);
mm128_t *mg_lchain_rmq(int max_dist, int max_dist_inner, int bw, int max_chn_skip, int cap_rmq_size, int min_cnt, int min_sc, float chn_pen_gap, float chn_pen_skip,
					   int64_t n, mm128_t *a, int *n_u_, uint64_t **_u, void *km) {
	mm128_t *b;
	int64_t i, n_v = 0;
	if (fp_()) { hdr(15, 0, 0, 9, n, 0); wd(max_dist); wd(max_dist_inner); wd(bw); wd(max_chn_skip); wd(cap_rmq_size); wd(min_cnt); wd(min_sc); wd(chn_pen_gap); wd(chn_pen_skip); wa(n, a); }
	b = mg_lchain_rmq_orig(max_dist, max_dist_inner, bw, max_chn_skip, cap_rmq_size, min_cnt, min_sc, chn_pen_gap, chn_pen_skip, n, a, n_u_, _u, km);
	if (fp_()) { for (i = 0; i < *n_u_; ++i) n_v += (int32_t)(*_u)[i]; hdr(15, 1, 0, 0, n_v, *n_u_); wa(n_v, b); wu(*n_u_, *_u); }
	return b;
}
