/* CPU peer for the pairwise engine (issue 7): parasail functions timed on a fixed set of pairs,
 * on all cores, in C (no Python between the calls).  Driven by scripts/parasail_peer.py, built by
 * scripts/build_parasail_peer.sh.
 *
 *   parasail_peer [-t THREADS] [-r REPS] [-M MATCH] [-X MISMATCH] [-N NSCORE] [-o OPEN] [-e EXTEND]
 *                 [-L LIBPARASAIL] [-s SCORE_DIR] PAIRS_FILE FUNCTION [FUNCTION ...]
 *
 * PAIRS_FILE (little endian, written by parasail_peer.py):
 *   char magic[8] = "G3PAIRS1"; int64 k, q_total, t_total;
 *   int64 q_off[k+1], t_off[k+1];       CSR offsets into the letter arrays (q_off[0] = 0)
 *   char q[q_total], t[t_total];        letters A C G T N (no terminators)
 * Pair i is query q[q_off[i]:q_off[i+1]] (parasail's s1) against target t[t_off[i]:t_off[i+1]] (s2).
 *
 * Scoring is given in parasail's convention: a gap of length L costs OPEN + (L-1)*EXTEND (g3align's
 * gap_open + L*gap_extend is OPEN = gap_open + gap_extend, EXTEND = gap_extend).  The matrix is
 * parasail_matrix_create("ACGTN", MATCH, -MISMATCH) with the N row and column set to NSCORE.
 * Defaults are g3align's bwa scoring 1/4/6/1: MATCH 1, MISMATCH 4, NSCORE -1, OPEN 7, EXTEND 1.
 *
 * Each FUNCTION is a parasail name as parasail_lookup_function knows it ("parasail_sw_striped_16";
 * the plain names are the run-time dispatchers, which pick AVX2 / SSE4.1 / SSE2 for this CPU).
 * The pairs are cut into THREADS contiguous slices of about equal cells (sum of m*n); each pthread
 * aligns its slice and frees every result; for traceback functions (names with "_trace_") it also
 * builds the CIGAR with parasail_result_get_cigar and frees it, since g3align returns CIGARs too.
 * One untimed call on pair 0 resolves the dispatcher first.  The parallel part (thread start to last
 * join) is timed with CLOCK_MONOTONIC, REPS times; the best time is reported.  One line per function:
 *   FUNCTION pairs= cells= threads= reps= seconds= mean_seconds= gcups= checksum= saturated= failed=
 *   cigar_ops= maxrss_mb= isa=
 * checksum is the sum of the scores; maxrss_mb the process's peak resident size so far (VmHWM).  With -s the
 * scores (int32, pair order, from the last repetition) go to SCORE_DIR/FUNCTION.i32.
 *
 * libparasail.so is opened with dlopen, not linked: the wheel's library carries the SONAME
 * libparasail.so.8 but is installed as libparasail.so, so a linked binary would not find it.
 * dlopen("libparasail.so") searches LD_LIBRARY_PATH and this binary's RUNPATH (set by the build
 * script); -L gives an explicit path.  Types come from the wheel's parasail.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "parasail.h"
#include "parasail/cpuid.h"

/* The few library entry points used, resolved by dlsym; types checked against parasail.h. */
#define PS_FUNCS(X) X(lookup_function) X(matrix_create) X(matrix_set_value) X(matrix_free) \
	X(result_get_score) X(result_is_saturated) X(result_get_cigar) X(cigar_free) X(result_free) \
	X(version) X(can_use_avx2) X(can_use_sse41)
#define PS_FIELD(f) __typeof__(&parasail_##f) f;
static struct { PS_FUNCS(PS_FIELD) } ps;

typedef struct {
	int64_t k;                  /* number of pairs */
	int64_t *q_off, *t_off;     /* [k+1] CSR offsets */
	char *q, *t;                /* letters */
	int64_t cells;              /* sum of m*n */
} pairs_t;

typedef struct {                /* one thread's share of one repetition */
	const pairs_t *p;
	parasail_function_t *fn;
	const parasail_matrix_t *mat;
	int open, extend, trace;
	int64_t lo, hi;             /* pairs [lo, hi) */
	int32_t *score;             /* [k], shared; each thread writes its slice */
	int64_t saturated, failed, cigar_ops;
} slice_t;

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "parasail_peer: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(1);
}

static void *xmalloc(size_t n)
{
	void *x = malloc(n ? n : 1);
	if (!x) die("out of memory%s", "");
	return x;
}

static void xread(FILE *fp, void *buf, size_t n, const char *path)
{
	if (n && fread(buf, 1, n, fp) != n) die("%s: file too short", path);
}

static void read_pairs(const char *path, pairs_t *p)
{
	char magic[8];
	int64_t hdr[3], i;
	FILE *fp = fopen(path, "rb");
	if (!fp) die("cannot open %s", path);
	xread(fp, magic, 8, path);
	if (memcmp(magic, "G3PAIRS1", 8) != 0) die("%s: not a G3PAIRS1 file", path);
	xread(fp, hdr, sizeof hdr, path);
	p->k = hdr[0];
	if (p->k < 0 || hdr[1] < 0 || hdr[2] < 0) die("%s: bad header", path);
	p->q_off = xmalloc((p->k + 1) * sizeof(int64_t));
	p->t_off = xmalloc((p->k + 1) * sizeof(int64_t));
	p->q = xmalloc(hdr[1]);
	p->t = xmalloc(hdr[2]);
	xread(fp, p->q_off, (p->k + 1) * sizeof(int64_t), path);
	xread(fp, p->t_off, (p->k + 1) * sizeof(int64_t), path);
	xread(fp, p->q, hdr[1], path);
	xread(fp, p->t, hdr[2], path);
	fclose(fp);
	if (p->q_off[0] != 0 || p->t_off[0] != 0 || p->q_off[p->k] != hdr[1] || p->t_off[p->k] != hdr[2])
		die("%s: offsets do not match the header", path);
	for (i = 0, p->cells = 0; i < p->k; ++i) {
		int64_t m = p->q_off[i + 1] - p->q_off[i], n = p->t_off[i + 1] - p->t_off[i];
		if (m < 0 || n < 0 || m > INT32_MAX || n > INT32_MAX) die("%s: bad offsets", path);
		p->cells += m * n;
	}
}

static void load_parasail(const char *lib)
{
	void *h = dlopen(lib ? lib : "libparasail.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) die("%s (set LD_LIBRARY_PATH to the folder of libparasail.so, or use -L)", dlerror());
#define PS_LOAD(f) if (!(*(void **)&ps.f = dlsym(h, "parasail_" #f))) die("symbol parasail_%s missing", #f);
	PS_FUNCS(PS_LOAD)
#undef PS_LOAD
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Align pairs [lo, hi) of one slice. */
static void *worker(void *arg)
{
	slice_t *s = arg;
	const pairs_t *p = s->p;
	int64_t i;
	for (i = s->lo; i < s->hi; ++i) {
		const char *q = p->q + p->q_off[i], *t = p->t + p->t_off[i];
		int m = (int)(p->q_off[i + 1] - p->q_off[i]), n = (int)(p->t_off[i + 1] - p->t_off[i]);
		parasail_result_t *r = s->fn(q, m, t, n, s->open, s->extend, s->mat);
		if (!r) {               /* parasail refuses empty sequences */
			s->score[i] = 0;
			++s->failed;
			continue;
		}
		s->score[i] = ps.result_get_score(r);
		s->saturated += ps.result_is_saturated(r) != 0;
		if (s->trace) {
			parasail_cigar_t *c = ps.result_get_cigar(r, q, m, t, n, s->mat);
			if (c) {
				s->cigar_ops += c->len;
				ps.cigar_free(c);
			} else ++s->failed;
		}
		ps.result_free(r);
	}
	return NULL;
}

/* Cut [0, k) into nt contiguous slices of about equal cells: slice j starts at the first pair whose
 * cumulative cells before it reach j/nt of the total. */
static void cut_slices(const pairs_t *p, int nt, int64_t *start)
{
	int64_t i, acc = 0;
	int j = 1;
	start[0] = 0;
	for (i = 0; i < p->k && j < nt; ++i) {
		while (j < nt && acc >= (int64_t)((double)p->cells * j / nt)) start[j++] = i;
		acc += (p->q_off[i + 1] - p->q_off[i]) * (p->t_off[i + 1] - p->t_off[i]);
	}
	while (j < nt) start[j++] = p->k;
	start[nt] = p->k;
}

/* Peak resident size of this process in MB: VmHWM (ru_maxrss would include the parent's peak, which
 * Linux carries across exec). */
static double peak_rss_mb(void)
{
	char line[256];
	double kb = -1;
	FILE *fp = fopen("/proc/self/status", "r");
	while (fp && fgets(line, sizeof line, fp))
		if (strncmp(line, "VmHWM:", 6) == 0) kb = atof(line + 6);
	if (fp) fclose(fp);
	if (kb < 0) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		kb = ru.ru_maxrss;
	}
	return kb / 1024.0;
}

static const char *isa_name(void)
{
	return ps.can_use_avx2() ? "avx2" : ps.can_use_sse41() ? "sse41" : "sse2";
}

static void usage(void)
{
	fprintf(stderr, "usage: parasail_peer [-t THREADS] [-r REPS] [-M MATCH] [-X MISMATCH] [-N NSCORE] "
	        "[-o OPEN] [-e EXTEND] [-L LIBPARASAIL] [-s SCORE_DIR] PAIRS_FILE FUNCTION [FUNCTION ...]\n"
	        "(scoring in parasail's convention; defaults 1 4 -1 7 1 = g3align's 1/4/6/1 with N = -1)\n");
	exit(1);
}

int main(int argc, char *argv[])
{
	int c, nt = 0, reps = 1, match = 1, mismatch = 4, nscore = -1, open = 7, extend = 1;
	int a, j, rep, fi, vmaj, vmin, vpat;
	const char *lib = NULL, *score_dir = NULL;
	pairs_t p;
	while ((c = getopt(argc, argv, "t:r:M:X:N:o:e:L:s:")) >= 0) {
		if (c == 't') nt = atoi(optarg);
		else if (c == 'r') reps = atoi(optarg);
		else if (c == 'M') match = atoi(optarg);
		else if (c == 'X') mismatch = atoi(optarg);
		else if (c == 'N') nscore = atoi(optarg);
		else if (c == 'o') open = atoi(optarg);
		else if (c == 'e') extend = atoi(optarg);
		else if (c == 'L') lib = optarg;
		else if (c == 's') score_dir = optarg;
		else usage();
	}
	if (argc - optind < 2 || reps < 1) usage();
	if (nt <= 0) nt = (int)sysconf(_SC_NPROCESSORS_ONLN);
	load_parasail(lib);
	read_pairs(argv[optind], &p);
	if (nt > p.k && p.k > 0) nt = (int)p.k;

	parasail_matrix_t *mat = ps.matrix_create("ACGTN", match, -mismatch);
	for (a = 0; a < 5; ++a) {       /* N (index 4) scores NSCORE against everything */
		ps.matrix_set_value(mat, 4, a, nscore);
		ps.matrix_set_value(mat, a, 4, nscore);
	}
	ps.version(&vmaj, &vmin, &vpat);
	fprintf(stderr, "parasail_peer: libparasail %d.%d.%d (%s); %lld pairs, %lld cells, %d threads\n",
	        vmaj, vmin, vpat, isa_name(), (long long)p.k, (long long)p.cells, nt);

	int64_t *start = xmalloc((nt + 1) * sizeof(int64_t));
	cut_slices(&p, nt, start);
	slice_t *sl = xmalloc(nt * sizeof(slice_t));
	pthread_t *tid = xmalloc(nt * sizeof(pthread_t));
	int32_t *score = xmalloc(p.k * sizeof(int32_t));

	for (fi = optind + 1; fi < argc; ++fi) {
		const char *name = argv[fi];
		parasail_function_t *fn = ps.lookup_function(name);
		if (!fn) {
			printf("%s error=unknown_function\n", name);
			fflush(stdout);
			continue;
		}
		int trace = strstr(name, "_trace_") != NULL;
		if (p.k > 0) {              /* untimed: resolves the dispatcher before the threads race to it */
			parasail_result_t *r = fn(p.q, (int)p.q_off[1], p.t, (int)p.t_off[1], open, extend, mat);
			if (r) ps.result_free(r);
		}
		double best = 1e300, sum = 0.0;
		for (rep = 0; rep < reps; ++rep) {
			for (j = 0; j < nt; ++j) {
				slice_t s = {&p, fn, mat, open, extend, trace, start[j], start[j + 1], score, 0, 0, 0};
				sl[j] = s;
			}
			double t0 = now();
			for (j = 0; j < nt; ++j)
				if ((errno = pthread_create(&tid[j], NULL, worker, &sl[j])) != 0) die("pthread_create: %s", strerror(errno));
			for (j = 0; j < nt; ++j) pthread_join(tid[j], NULL);
			double dt = now() - t0;
			best = dt < best ? dt : best;
			sum += dt;
		}
		int64_t sat = 0, failed = 0, ops = 0, checksum = 0, i;
		for (j = 0; j < nt; ++j) sat += sl[j].saturated, failed += sl[j].failed, ops += sl[j].cigar_ops;
		for (i = 0; i < p.k; ++i) checksum += score[i];
		printf("%s pairs=%lld cells=%lld threads=%d reps=%d seconds=%.6f mean_seconds=%.6f gcups=%.4f "
		       "checksum=%lld saturated=%lld failed=%lld cigar_ops=%lld maxrss_mb=%.1f isa=%s\n",
		       name, (long long)p.k, (long long)p.cells, nt, reps, best, sum / reps,
		       best > 0 ? p.cells / best * 1e-9 : 0.0, (long long)checksum, (long long)sat,
		       (long long)failed, (long long)ops, peak_rss_mb(), isa_name());
		fflush(stdout);
		if (score_dir) {
			size_t len = strlen(score_dir) + strlen(name) + 8;
			char *path = xmalloc(len);
			snprintf(path, len, "%s/%s.i32", score_dir, name);
			FILE *fp = fopen(path, "wb");
			if (!fp || fwrite(score, sizeof(int32_t), p.k, fp) != (size_t)p.k) die("cannot write %s", path);
			fclose(fp);
			free(path);
		}
	}
	ps.matrix_free(mat);
	free(score); free(tid); free(sl); free(start);
	free(p.q_off); free(p.t_off); free(p.q); free(p.t);
	return 0;
}
