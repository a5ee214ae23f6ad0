#!/bin/bash
# `g3align mem --device gpu` on the GPU box (issue 4): GPU tests of the staged mem path, then
# scripts/gpu_check.py (chr20, simulated pairs: GPU SAM == CPU SAM, stage times, bwa mem -t 16 in the
# same run).  Needs .devdata/human_GRCh37_chr20.fa.gz, .devdata/bwa and the pydivsufsort wheel in .whl/ (carry them).  Results under $OUT.
#   PAIRS (default 500000), PYTEST_TIMEOUT, PYTEST_K (none | all (default) | a -k expression), PYTEST_ARGS (test files or
#   node ids instead of the four GPU test files), CHECK=0 skips the check,
#   CLI=1 adds the CLI end-to-end runs; with .devdata/minimap2 carried, minimap2 -ax sr runs for context;
#   PROFILE=1 first profiles the PE pipeline's host time (scripts/gpu_pe_profile.py; carry the py-spy wheel in .whl/),
#   PE_VARIANTS='WORKER_NICE=0;PE_AHEAD=4' adds GPU PE runs with other pipeline settings (gpu_check --pe-variants)
#   CLIPROF=1 profiles the CLI end to end (scripts/gpu_cli_profile.py; VARIANTS='PREP_WORKERS=2;...' A/B runs of G3ALIGN_TUNE sizes)
#   REPEAT=3 runs the default and VARIANTS three times, interleaved, and reports medians
#   BEFORE='python3 scripts/cpu_probe.py' runs a command first, in this script's environment (output: the call's tail)
#   AFTER='python3 scripts/reader_probe.py /tmp/g3work/r1.fq /tmp/g3work/r2.fq' the same after CLIPROF's runs
#   NBCACHE=1 carries the kernel cache between calls (.devcache/mem/: copy $OUT's g3cache.tgz.* there)
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
mkdir -p /tmp/pkg/g3align && cp g3align/__init__.py /tmp/pkg/g3align/
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
ls .whl/pydivsufsort*.whl >/dev/null 2>&1 && pip install -q --no-index --no-deps --target /tmp/site .whl/pydivsufsort*.whl
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1 NUMBA_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
# NBCACHE=1: numba's cache carried between calls in $NBCACHE_DIR (default .devcache/mem; scripts/nbcache.sh)
NBCACHE_DIR=${NBCACHE_DIR:-.devcache/mem}; . scripts/nbcache.sh; nbcache_in; bytecode_in
# at the end: the CLI profile's per-run traces (and py-spy's) as one tar (the box returns at most 8 files), then the cache
pack_out() {
    if ls "$OUT"/cli_trace_* >/dev/null 2>&1; then  # with py-spy's raw profiles and summaries, when any
        local fs; fs=$(cd "$OUT" && ls cli_trace_* cli_pyspy* 2>/dev/null)
        tar czf "$OUT/cli_traces.tgz" -C "$OUT" $fs && (cd "$OUT" && rm -f $fs)
    fi
    nbcache_out
}
trap pack_out EXIT
if [ -n "${BEFORE:-}" ]; then  # BEFORE='cmd': a probe run first, in this environment (PYTHONPATH, numba cache)
    (eval "$BEFORE") 2>&1 | tee /tmp/before.log | tail -40  # not in $OUT: the box returns at most 8 files
fi
if [ "${PYTEST_K:-all}" != "none" ]; then
    K=(); [ "${PYTEST_K:-all}" != all ] && K=(-k "$PYTEST_K")
    FILES=(${PYTEST_ARGS:-tests/test_memcigar.py tests/test_memstage.py tests/test_memchain.py tests/test_smem_gpu.py})
    timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -q "${FILES[@]}" "${K[@]}" 2>&1 \
        | tail -5 | tee "$OUT/pytest_mem.txt"
fi
if [ "${PROFILE:-0}" = 1 ]; then  # host-time profile of the PE pipeline (py-spy wheel in .whl/ when carried)
    ls .whl/py_spy*.whl >/dev/null 2>&1 && pip install -q --no-index --no-deps --target /tmp/site .whl/py_spy*.whl
    timeout ${CHECK_TIMEOUT:-420} python3 scripts/gpu_pe_profile.py --fasta .devdata/human_GRCh37_chr20.fa.gz \
        --pairs ${PAIRS:-500000} --threads $(nproc) --out "$OUT" --py-spy /tmp/site/bin/py-spy 2>&1 \
        | tee "$OUT/gpu_pe_profile.log" | tail -60
fi
if [ "${CLIPROF:-0}" = 1 ]; then  # the CLI end to end: start-up, traces, A/B variants beside bwa (py-spy when carried)
    SPY=(); ls .whl/py_spy*.whl >/dev/null 2>&1 && pip install -q --no-index --no-deps --target /tmp/site .whl/py_spy*.whl \
        && SPY=(--py-spy /tmp/site/bin/py-spy)
    timeout ${CHECK_TIMEOUT:-420} python3 scripts/gpu_cli_profile.py --fasta .devdata/human_GRCh37_chr20.fa.gz \
        --pairs ${PAIRS:-1000000} --threads $(nproc) --bwa .devdata/bwa --out "$OUT" --variants "${VARIANTS:-}" --repeat ${REPEAT:-1} \
        "${SPY[@]}" 2>&1 | tee "$OUT/gpu_cli_profile.log" | tail -40
fi
if [ -n "${AFTER:-}" ]; then  # AFTER='cmd': a probe run after the profile (its inputs are in /tmp/g3work), output: the tail
    (eval "$AFTER") 2>&1 | tail -40
fi
[ "${CHECK:-1}" = 0 ] && exit 0
EXTRA=()
[ -x .devdata/minimap2 ] && EXTRA+=(--minimap2 .devdata/minimap2)   # context peer, when carried
[ "${CLI:-0}" = 1 ] && EXTRA+=(--cli)                                # CLI end to end, index load apart
[ -n "${PE_VARIANTS:-}" ] && EXTRA+=(--pe-variants "$PE_VARIANTS")  # extra GPU PE runs with other pipeline settings
timeout ${CHECK_TIMEOUT:-420} python3 scripts/gpu_check.py --fasta .devdata/human_GRCh37_chr20.fa.gz \
    --pairs ${PAIRS:-500000} --threads $(nproc) --bwa .devdata/bwa --out "$OUT" "${EXTRA[@]}" 2>&1 \
    | tee "$OUT/gpu_check.log" | tail -40
