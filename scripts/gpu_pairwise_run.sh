#!/bin/bash
# Pairwise engine on the GPU box, one run (see docs/BENCHMARKS.md, "Pairwise DP engine: kernels"):
#   bash scripts/gpu_pairwise_run.sh "STAGES" [sweep|nosweep] [pytest|nopytest] [peer|nopeer]
# env: BENCH_TIMEOUT, PEER_TIMEOUT, PYTEST_TIMEOUT (seconds), PYTEST_K (pytest -k expression)
# carry .whl (parasail wheel; pydivsufsort not needed here; for `peer` also .whl/parasail_peer, built
# here by scripts/build_parasail_peer.sh: parasail timed in C on all cores).  Results under $OUT.
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/parasail-*.whl >/dev/null 2>&1 || echo "parasail wheel not installed"
mkdir -p /tmp/pkg/g3align
cp g3align/__init__.py /tmp/pkg/g3align/
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1 NUMBA_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv | tee "$OUT/smi.txt"
STAGES=${1:-check16,sweep16,b16}
timeout ${BENCH_TIMEOUT:-330} python3 scripts/gpu_pairwise_bench.py --stages "$STAGES" 2>&1 | tee "$OUT/bench_log.txt"
if [ "${2:-sweep}" = sweep ]; then
    timeout 300 python3 scripts/pairwise_parasail_sweep.py --pairs ${SWEEP_PAIRS:-100000} --cpu-check 3000 \
        --out "$OUT" 2>&1 | tail -20 > "$OUT/sweep_log.txt"; cat "$OUT/sweep_log.txt"
fi
if [ "${4:-nopeer}" = peer ]; then
    chmod +x .whl/parasail_peer 2>/dev/null
    timeout ${PEER_TIMEOUT:-420} python3 scripts/parasail_peer.py --lib-dir /tmp/site/parasail --out "$OUT" 2>&1 \
        | tee "$OUT/parasail_peer_log.txt" | tail -25
fi
if [ "${3:-pytest}" = pytest ]; then
    timeout ${PYTEST_TIMEOUT:-450} python3 -m pytest -q -x tests/test_pairwise.py ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | tail -15 | tee "$OUT/pytest.txt"
fi
