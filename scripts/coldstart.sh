#!/bin/bash
# Cold start (docs/BENCHMARKS.md, "Cold start"): g3align installed from this tree (pip, not editable) into an
# empty prefix with empty kernel caches; `g3align warmup`; then the first and a second run of each command on the
# demo data (-t = the cores), timed, their output checked against bwa's / minimap2's golden files; finally a run
# as an unprivileged user from the same root-owned install with a copy of the cache.
# On the GPU box carry .whl (pydivsufsort, pysam, click, tqdm wheels for the box's Python); elsewhere the
# dependencies come from $PYTHON's environment (PYTHON=.venv/bin/python). Results under $OUT.
#   WARMUP=0 skips the warm-up (the first runs then compile; RUN_TIMEOUT, default 60 s, bounds each run);
#   NORUNS=1 stops after the warm-up; WHEEL=1 builds the wheel that carries the compiled kernels (make wheel)
#   and installs that instead, no warm-up (the first runs then need no compile).
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
LOG=$OUT/coldstart.txt
exec > >(tee "$LOG") 2>&1
PY=${PYTHON:-$(command -v python3)}
python3() { "$PY" "$@"; }
T=$(nproc)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU"
echo "cores $T; $(python3 -c 'import numba, numpy, sys; print("python", sys.version.split()[0], "numba", numba.__version__, "numpy", numpy.__version__)')"
rm -rf /tmp/site /tmp/g3 /tmp/ucache /tmp/ucupy  # a box kept warm between calls keeps /tmp
mkdir -p /tmp/site
W8=${WHEELS:-.whl}  # WHEELS=none: take the dependencies from $PYTHON's environment
if [ -d "$W8" ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site "$W8"/*.whl || exit 1; fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
if [ "${WHEEL:-0}" = 1 ]; then  # build the wheel that carries the compiled kernels (make wheel), then install it
    rm -rf /tmp/dist /tmp/buildcache /tmp/buildcupy build/lib
    t=$(date +%s.%N)
    G3ALIGN_BUILD_KERNELS=1 G3ALIGN_CACHE_DIR=/tmp/buildcache CUPY_CACHE_DIR=/tmp/buildcupy \
        python3 -m pip wheel -q --no-index --no-deps --no-build-isolation -w /tmp/dist . || exit 1
    echo "wheel built (every kernel compiled): $(python3 -c "import time; print(round(time.time() - $t, 1))") s: $(ls /tmp/dist) $(du -h /tmp/dist/*.whl | cut -f1)"
    rm -rf /tmp/buildcache /tmp/buildcupy
    t=$(date +%s.%N)
    python3 -m pip install -q --no-index --no-deps --target /tmp/g3 /tmp/dist/*.whl || exit 1
    echo "pip install of the wheel: $(python3 -c "import time; print(round(time.time() - $t, 1))") s"
    WARMUP=0
fi
t=$(date +%s.%N)
if [ "${WHEEL:-0}" = 1 ]; then :
elif ! python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/g3 .; then
    echo "pip install failed: the package laid out as pip lays it, by copying"
    rm -rf /tmp/g3; mkdir -p /tmp/g3/g3align /tmp/g3/bin && cp g3align/*.py /tmp/g3/g3align/ || exit 1
    for d in aligner index kernels; do cp -r $d /tmp/g3/g3align/$d; done
    printf '#!/bin/sh\nexec %s -m g3align.aligner.cli "$@"\n' "$PY" > /tmp/g3/bin/g3align; chmod +x /tmp/g3/bin/g3align
fi
[ "${WHEEL:-0}" = 1 ] || echo "pip install: $(python3 -c "import time; print(round(time.time() - $t, 1))") s"
export PYTHONPATH=/tmp/g3:/tmp/site PATH=/tmp/g3/bin:$PATH
export G3ALIGN_CACHE_DIR=/tmp/g3cache CUPY_CACHE_DIR=/tmp/cupycache
rm -rf "$G3ALIGN_CACHE_DIR" "$CUPY_CACHE_DIR"
W=/tmp/cs; rm -rf $W; mkdir -p $W
touch $W/stamp
secs() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
if [ "${WARMUP:-1}" = 1 ]; then
    t=$(date +%s.%N); timeout ${WARMUP_TIMEOUT:-420} g3align warmup; rc=$?; echo "g3align warmup: $(secs "$t") s (exit $rc)"
fi
[ "${NORUNS:-0}" = 1 ] && exit 0
gzip -dc data/golden/lambda_se.bwa.sam.gz > $W/se.gold.sam
gzip -dc data/golden/lambda_pe.bwa.sam.gz > $W/pe.gold.sam
gzip -dc data/golden/lambda_pbsim.mm2.sam.gz > $W/pb.gold.sam
run() {  # run NAME ARGS...: time it, output to $W/NAME.sam, stderr to $W/NAME.err
    local name=$1; shift
    local t; t=$(date +%s.%N)
    timeout ${RUN_TIMEOUT:-60} g3align "$@" > "$W/$name.sam" 2> "$W/$name.err"; local rc=$?
    local note; note=$(grep -c "compiling" "$W/$name.err")
    echo "$name: $(secs "$t") s, exit $rc, compile notes $note: g3align $*"
    grep "compiling" "$W/$name.err" | cut -c1-160
}
t=$(date +%s.%N); g3align index -p $W/lambda data/lambda.fa.gz 2> $W/index.err; echo "index: $(secs "$t") s"
# pairwise inputs for the align runs: 208 PacBio read starts (150 bp) against 160 bp of the reference each
python3 - <<'EOF2'
import gzip
seqs = [l.strip() for i, l in enumerate(gzip.open("data/lambda_pbsim.fq.gz", "rt")) if i % 4 == 1]
ref = "".join(l.strip() for l in gzip.open("data/lambda.fa.gz", "rt") if not l.startswith(">"))
with open("/tmp/cs/q.fa", "w") as q, open("/tmp/cs/t.fa", "w") as t:
    for i, s in enumerate(seqs * 4):
        q.write(f">q{i}\n{s[:150]}\n"); t.write(f">t{i}\n{ref[i * 100:i * 100 + 160]}\n")
EOF2
for k in 1 2; do
    run se$k mem -t $T $W/lambda data/lambda_R1.fq.gz
    run pe$k mem -t $T $W/lambda data/lambda_R1.fq.gz data/lambda_R2.fq.gz
    run pb$k map -t $T -ax map-pb data/lambda.fa.gz data/lambda_pbsim.fq.gz
    run ont$k map -t $T -ax map-ont data/lambda.fa.gz data/lambda_pbsim.fq.gz
    run align$k align --mode local --traceback $W/q.fa $W/t.fa
done
for x in se pe pb; do
    g3align compare --strict $W/${x}1.sam $W/$x.gold.sam > $W/$x.cmp 2>&1; echo "$x vs golden: exit $? $(grep -m1 identical $W/$x.cmp)"
    cmp -s $W/${x}1.sam $W/${x}2.sam && echo "$x: first == second run"
done
cmp -s $W/ont1.sam $W/ont2.sam && echo "ont: first == second run"
cmp -s $W/align1.sam $W/align2.sam && echo "align: first == second run"
echo "files written into the install since the start: $(find /tmp/g3 -newer $W/stamp -type f | wc -l)"
# an unprivileged user, the root-owned install, a copy of the cache (the cache is keyed by content, not path)
mkdir -p "$CUPY_CACHE_DIR"; cp -r "$G3ALIGN_CACHE_DIR" /tmp/ucache && cp -r "$CUPY_CACHE_DIR" /tmp/ucupy && chown -R nobody /tmp/ucache /tmp/ucupy && chmod -R a+rX /tmp/g3 /tmp/site $W
chmod a+rwx $W
t=$(date +%s.%N)
runuser -u nobody -- env HOME=/tmp PATH="$PATH" PYTHONPATH="$PYTHONPATH" G3ALIGN_CACHE_DIR=/tmp/ucache \
    CUPY_CACHE_DIR=/tmp/ucupy PYTHONSAFEPATH=1 "$PY" -m g3align.aligner.cli mem -t $T $W/lambda data/lambda_R1.fq.gz > $W/se_user.sam 2> $W/se_user.err
rc=$?; echo "se as nobody: $(secs "$t") s, exit $rc, compile notes $(grep -c compiling $W/se_user.err)"
cmp -s $W/se1.sam $W/se_user.sam && echo "se as nobody == se1"
if [ "${WHEEL:-0}" = 1 ]; then  # nobody, no cache it may write: the kernels straight from the install
    t=$(date +%s.%N)
    runuser -u nobody -- env HOME=/nonexistent PATH="$PATH" PYTHONPATH="$PYTHONPATH" G3ALIGN_CACHE_DIR=/proc/nocache \
        CUPY_CACHE_DIR=/tmp/ucupy PYTHONSAFEPATH=1 "$PY" -m g3align.aligner.cli mem -t $T $W/lambda data/lambda_R1.fq.gz > $W/se_ro.sam 2> $W/se_ro.err
    rc=$?; echo "se as nobody, no writable cache: $(secs "$t") s, exit $rc, compile notes $(grep -c compiling $W/se_ro.err)"
    cmp -s $W/se1.sam $W/se_ro.sam && echo "se, no writable cache == se1"
fi
for f in $W/*.err; do echo "== $f"; tail -n 3 "$f"; done > "$OUT/stderr_tails.txt" 2>&1
