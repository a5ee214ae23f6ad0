#!/bin/bash
# The pairwise engine end to end on the GPU box (one run on the box; carry .whl with the click, tqdm and
# parasail wheels and .whl/parasail_peer from scripts/build_parasail_peer.sh):
#   bash scripts/gpu_pairwise_api.sh [bench args...]     e.g. --stages xfer,api,cli --cli-pairs 10000000
# env: PEER=1 also runs parasail on all cores (scripts/parasail_peer.py, 150 bp and 1 kb, local and global;
#      PEER_ARGS=--quick for its smaller workloads);
#      PYTEST=1 also runs tests/test_pwio.py and tests/test_pairwise.py (PYTEST_K: a -k expression).  Results under $OUT.
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/click-*.whl .whl/tqdm-*.whl \
    .whl/parasail-*.whl >/dev/null 2>&1 || echo "wheels not installed"
mkdir -p /tmp/pkg/g3align
for f in g3align/*; do ln -sfn "$PWD/$f" /tmp/pkg/g3align/; done
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1 NUMBA_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1
# NBCACHE=DIR: numba's cache carried in DIR (built elsewhere for the portable x86-64-v3 target with Python 3.12 and
# the box's numba, e.g. by running tests/test_pwio.py and tests/test_pairwise.py there with G3ALIGN_CPU=portable
# G3ALIGN_CACHE_DIR=DIR): the CPU twins the tests use load instead of compiling
if [ -n "${NBCACHE:-}" ]; then export G3ALIGN_CPU=portable G3ALIGN_CACHE_DIR="$PWD/$NBCACHE"; fi
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee "$OUT/device.txt"
lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a "$OUT/device.txt"
python3 -c "from g3align.aligner.cli import entry; entry()" warmup --help >/dev/null 2>&1
if [ "${PYTEST:-0}" = 1 ]; then
    timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider tests/test_pwio.py tests/test_pairwise.py ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | tail -30 \
        | tee "$OUT/pytest.txt"
fi
timeout ${BENCH_TIMEOUT:-420} python3 scripts/pairwise_api_bench.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench_log.txt"
if [ "${PEER:-0}" = 1 ]; then
    chmod +x .whl/parasail_peer 2>/dev/null
    timeout ${PEER_TIMEOUT:-200} python3 scripts/parasail_peer.py --lib-dir /tmp/site/parasail --out "$OUT" \
        --workloads 150bp,1kb --modes local,global ${PEER_ARGS:-} 2>&1 | tee "$OUT/parasail_peer_log.txt" | tail -12
fi
