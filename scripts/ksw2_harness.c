/* Oracle harness for aligner/map/ksw2.py: compiled against minimap2 v2.24 sources (not part of this
 * repository), see tests/test_ksw2.py (build_harness).  Reads one case per line on stdin:
 *   d qlen tlen q e q2 e2 w zdrop end_bonus flag mat[25] qseq tseq     (extd2)
 *   z qlen tlen q e w zdrop end_bonus flag mat[25] qseq tseq            (extz2)
 *   l qlen tlen gapo gape mat[25] qseq tseq                             (ll_qinit(size 2) + ll_i16)
 * sequences are strings of digits 0..4 ('-' when empty).  Prints one line per case:
 *   max zdropped max_q max_t mqe mqe_t mte mte_q score reach_end n_cigar cigar...   or  score qe te
 * The SSE4.1 and SSE2 builds are both run; "!" is appended when they disagree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "ksw2.h"

void ksw_extd2_sse41(void *km, int qlen, const uint8_t *query, int tlen, const uint8_t *target, int8_t m,
                     const int8_t *mat, int8_t q, int8_t e, int8_t q2, int8_t e2, int w, int zdrop, int end_bonus,
                     int flag, ksw_extz_t *ez);
void ksw_extd2_sse2(void *km, int qlen, const uint8_t *query, int tlen, const uint8_t *target, int8_t m,
                    const int8_t *mat, int8_t q, int8_t e, int8_t q2, int8_t e2, int w, int zdrop, int end_bonus,
                    int flag, ksw_extz_t *ez);
void ksw_extz2_sse41(void *km, int qlen, const uint8_t *query, int tlen, const uint8_t *target, int8_t m,
                     const int8_t *mat, int8_t q, int8_t e, int w, int zdrop, int end_bonus, int flag, ksw_extz_t *ez);
void ksw_extz2_sse2(void *km, int qlen, const uint8_t *query, int tlen, const uint8_t *target, int8_t m,
                    const int8_t *mat, int8_t q, int8_t e, int w, int zdrop, int end_bonus, int flag, ksw_extz_t *ez);

static char *buf;

static int read_seq(uint8_t **s, int len)
{
	int i;
	if (scanf("%s", buf) != 1) return -1;
	*s = (uint8_t *)malloc(len + 1);
	for (i = 0; i < len; ++i) (*s)[i] = (uint8_t)(buf[i] - '0');
	return 0;
}

static int same(const ksw_extz_t *a, const ksw_extz_t *b)
{
	if (a->max != b->max || a->zdropped != b->zdropped || a->max_q != b->max_q || a->max_t != b->max_t) return 0;
	if (a->mqe != b->mqe || a->mqe_t != b->mqe_t || a->mte != b->mte || a->mte_q != b->mte_q) return 0;
	if (a->score != b->score || a->reach_end != b->reach_end || a->n_cigar != b->n_cigar) return 0;
	return a->n_cigar == 0 || memcmp(a->cigar, b->cigar, a->n_cigar * 4) == 0;
}

static void out(const ksw_extz_t *z, int diff)
{
	int i;
	printf("%u %u %d %d %d %d %d %d %d %d %d", (unsigned)z->max, (unsigned)z->zdropped, z->max_q, z->max_t, z->mqe,
	       z->mqe_t, z->mte, z->mte_q, z->score, z->reach_end, z->n_cigar);
	for (i = 0; i < z->n_cigar; ++i) printf(" %u", z->cigar[i]);
	printf(diff ? " !\n" : "\n");
}

int main(void)
{
	char kind[4];
	buf = (char *)malloc(1 << 26);
	while (scanf("%3s", kind) == 1) {
		int qlen, tlen, q, e, q2 = 0, e2 = 0, w = 0, zdrop = 0, eb = 0, flag = 0, i, mv;
		int8_t mat[25];
		uint8_t *qs, *ts;
		if (scanf("%d%d", &qlen, &tlen) != 2) return 1;
		if (kind[0] == 'd') {
			if (scanf("%d%d%d%d%d%d%d%d", &q, &e, &q2, &e2, &w, &zdrop, &eb, &flag) != 8) return 1;
		} else if (kind[0] == 'z') {
			if (scanf("%d%d%d%d%d%d", &q, &e, &w, &zdrop, &eb, &flag) != 6) return 1;
		} else {
			if (scanf("%d%d", &q, &e) != 2) return 1;
		}
		for (i = 0; i < 25; ++i) {
			if (scanf("%d", &mv) != 1) return 1;
			mat[i] = (int8_t)mv;
		}
		if (read_seq(&qs, qlen) < 0 || read_seq(&ts, tlen) < 0) return 1;
		if (kind[0] == 'l') {
			int qe, te, sc;
			void *qp = ksw_ll_qinit(0, 2, qlen, qs, 5, mat);
			sc = ksw_ll_i16(qp, tlen, ts, q, e, &qe, &te);
			free(qp);
			printf("%d %d %d\n", sc, qe, te);
		} else {
			ksw_extz_t z1, z2;
			memset(&z1, 0, sizeof(z1));
			memset(&z2, 0, sizeof(z2));
			if (kind[0] == 'd') {
				ksw_extd2_sse41(0, qlen, qs, tlen, ts, 5, mat, q, e, q2, e2, w, zdrop, eb, flag, &z1);
				ksw_extd2_sse2(0, qlen, qs, tlen, ts, 5, mat, q, e, q2, e2, w, zdrop, eb, flag, &z2);
			} else {
				ksw_extz2_sse41(0, qlen, qs, tlen, ts, 5, mat, q, e, w, zdrop, eb, flag, &z1);
				ksw_extz2_sse2(0, qlen, qs, tlen, ts, 5, mat, q, e, w, zdrop, eb, flag, &z2);
			}
			out(&z1, !same(&z1, &z2));
			free(z1.cigar);
			free(z2.cigar);
		}
		free(qs);
		free(ts);
		fflush(stdout);
	}
	return 0;
}
