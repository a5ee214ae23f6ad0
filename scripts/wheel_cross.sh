#!/bin/bash
# A wheel made elsewhere (`make wheel` on another machine with this machine's Python minor version and numba),
# installed here into an empty prefix with empty kernel caches: the first run of each command on the CPU and on the
# GPU, timed, with its compile notes, output checked against the golden files (docs/BENCHMARKS.md "Cold start").
# Usage on the GPU box: WHEELFILE=.devdata/g3align-...whl bash scripts/wheel_cross.sh (carry .whl and the wheel).
OUT=${OUT:-gpu_out}; mkdir -p $OUT; exec > >(tee $OUT/cross.txt) 2>&1
PY=$(command -v python3)
rm -rf /tmp/g3x /tmp/xc /tmp/xcupy /tmp/xw; mkdir -p /tmp/xw /tmp/site
[ -d /tmp/site/pysam ] || $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
$PY -m pip install -q --no-index --no-deps --target /tmp/g3x "${WHEELFILE:?the wheel to install}" || exit 1
export PYTHONPATH=/tmp/g3x:/tmp/site PATH=/tmp/g3x/bin:$PATH G3ALIGN_CACHE_DIR=/tmp/xc CUPY_CACHE_DIR=/tmp/xcupy PYTHONSAFEPATH=1
W=/tmp/xw
secs() { $PY -c "import time; print(f'{time.time() - $1:.1f}')"; }
run() { local name=$1; shift; local t; t=$(date +%s.%N)
  g3align "$@" > $W/$name.sam 2> $W/$name.err; local rc=$?
  echo "$name: $(secs $t) s, exit $rc, notes $(grep -c compiling $W/$name.err): g3align $*"; grep compiling $W/$name.err | cut -c1-200; }
run index index -p $W/lambda data/lambda.fa.gz
for dev in cpu gpu; do
  run se_$dev mem --device $dev -t 16 $W/lambda data/lambda_R1.fq.gz
  run pe_$dev mem --device $dev -t 16 $W/lambda data/lambda_R1.fq.gz data/lambda_R2.fq.gz
  run pb_$dev map --device $dev -t 16 -ax map-pb data/lambda.fa.gz data/lambda_pbsim.fq.gz
  run ont_$dev map --device $dev -t 16 -ax map-ont data/lambda.fa.gz data/lambda_pbsim.fq.gz
done
gzip -dc data/golden/lambda_se.bwa.sam.gz > $W/se.gold; gzip -dc data/golden/lambda_pe.bwa.sam.gz > $W/pe.gold; gzip -dc data/golden/lambda_pbsim.mm2.sam.gz > $W/pb.gold
for dev in cpu gpu; do for x in se pe pb; do
  g3align compare --strict $W/${x}_$dev.sam $W/$x.gold > $W/c 2>&1; echo "$x $dev vs golden: exit $? $(grep -m1 identical $W/c)"; done
  cmp -s $W/ont_cpu.sam $W/ont_gpu.sam && echo "ont cpu == gpu"; done
ls /tmp/xc/numba/
