# g3align: `make demo` and `make test` are the two entry points (README).
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
DEMO_OUT ?= demo_out

.PHONY: install wheel demo test lint golden clean clean-cache gpu-check bench bench-cpu wg-ref

# pip install, then every kernel compiled for this machine with all cores (g3align warmup; once per version)
install:
	$(PIP) install -q -e '.[test]'
	g3align warmup

# A wheel that carries every kernel compiled (for the portable x86-64-v3 CPU level, g3align/jit.py): installed on
# any machine with the same Python and numba, its first run compiles nothing. Built without isolation, in this
# environment (numba compiles with the installed dependencies).
wheel: install
	$(PIP) install -q setuptools wheel
	G3ALIGN_BUILD_KERNELS=1 $(PIP) wheel -q --no-deps --no-build-isolation -w dist .

# Index the bundled lambda phage reference and align the bundled reads; compare with bwa's output.
demo: install
	mkdir -p $(DEMO_OUT)
	g3align index -p $(DEMO_OUT)/lambda data/lambda.fa.gz
	g3align mem -t 2 $(DEMO_OUT)/lambda data/lambda_R1.fq.gz > $(DEMO_OUT)/lambda_se.sam
	gzip -dc data/golden/lambda_se.bwa.sam.gz > $(DEMO_OUT)/lambda_se.bwa.sam
	g3align compare --strict $(DEMO_OUT)/lambda_se.sam $(DEMO_OUT)/lambda_se.bwa.sam
	g3align map -t 2 -ax map-pb data/lambda.fa.gz data/lambda_pbsim.fq.gz > $(DEMO_OUT)/lambda_pbsim.sam
	gzip -dc data/golden/lambda_pbsim.mm2.sam.gz > $(DEMO_OUT)/lambda_pbsim.mm2.sam
	g3align compare --strict $(DEMO_OUT)/lambda_pbsim.sam $(DEMO_OUT)/lambda_pbsim.mm2.sam --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA

test: install lint
	$(PYTHON) -m pytest -q tests

lint:
	ruff check aligner index tests g3align

# On the GPU box (see docs/BENCHMARKS.md for the carry/PYTHONPATH setup): the GPU tests (marked gpu), then the
# GPU == CPU SAM check and timings beside bwa (needs .devdata/ with the chr20 FASTA and a bwa binary).
OUT ?= gpu_out
gpu-check:
	mkdir -p $(OUT)
	PYTHONSAFEPATH=1 $(PYTHON) -m pytest -q -m gpu tests
	$(PYTHON) scripts/gpu_check.py --fasta .devdata/human_GRCh37_chr20.fa.gz --pairs 1000000 \
	    --out $(OUT) --bwa .devdata/bwa
	$(PYTHON) scripts/gpu_seed_bench.py --fasta .devdata/human_GRCh37_chr20.fa.gz --out $(OUT)
	$(PYTHON) scripts/gpu_stage_bench.py --fasta .devdata/human_GRCh37_chr20.fa.gz --out $(OUT)

# The benchmark suite (scripts/bench_suite.py, docs/BENCHMARKS.md): g3align beside bwa mem / minimap2 on 12
# workloads in one run on one machine, outputs compared byte for byte, one table with the minimum ratio per mode.
# `make bench` is the GPU box's size (there: `bash scripts/gpu_bench.sh mem`, then `... map`, carrying the
# .devdata/bench that `bash scripts/gpu_bench.sh pack` makes here); `make bench-cpu` is sized for a 2-core machine.
# Needs bwa, minimap2, dwgsim, wgsim and pbsim on PATH and ../shared/data (BENCH_DATA).
BENCH_DATA ?= ../shared/data
BENCH_WORK ?= bench_out
bench: install
	$(PYTHON) scripts/bench_suite.py --data $(BENCH_DATA) --work $(BENCH_WORK) --size gpu
bench-cpu: install
	$(PYTHON) scripts/bench_suite.py --data $(BENCH_DATA) --work $(BENCH_WORK)-cpu --size cpu --threads 2

# The whole-genome stand-in (scripts/wg_ref.py): 25 chromosomes with GRCh38's lengths (~3.1 Gbp) and 100 ALT-like
# contigs built from the shared references, with segmental duplications, tandem repeats and N gaps; deterministic.
# A stand-in, not a genome. WG_SIZE=2e8 for a smaller one.
WG_OUT ?= wg_out
WG_SIZE ?= 3.1e9
wg-ref:
	$(PYTHON) scripts/wg_ref.py --data $(BENCH_DATA) --out $(WG_OUT) --size $(WG_SIZE)

# Regenerate data/golden/* with the installed bwa (see data/README.md).
golden:
	bash scripts/make_golden.sh

# The compiled kernels live in ~/.cache/g3align (G3ALIGN_CACHE_DIR), keyed by the whole source tree: an edit
# never leaves a stale entry. This removes them all (every version); the next run or `g3align warmup` compiles.
clean-cache:
	$(PYTHON) -c 'import shutil; from g3align import jit; shutil.rmtree(jit.cache_root() / "numba", ignore_errors=True)'
	find . -name '*.nbi' -delete -o -name '*.nbc' -delete

clean: clean-cache
	rm -rf $(DEMO_OUT) .pytest_cache build *.egg-info
	find . -name '__pycache__' -prune -exec rm -rf {} +
