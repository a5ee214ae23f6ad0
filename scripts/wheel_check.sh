#!/bin/bash
# The first runs of an installed wheel (make wheel) with an empty kernel cache (.ci/run): index, mem, map on the demo
# data; each must compile nothing (no "compiling" line) and match bwa's / minimap2's golden output.
# Usage: bash scripts/wheel_check.sh OUTDIR   (g3align and G3ALIGN_CACHE_DIR from the environment)
set -euo pipefail
cd "$(dirname "$0")/.."
W=$1; mkdir -p "$W"
step() {  # step NAME ARGS...: g3align ARGS > W/NAME.sam, fail on a compile
    local name=$1; shift
    local t; t=$(date +%s.%N)
    g3align "$@" > "$W/$name.sam" 2> "$W/$name.err"
    echo "[wheel-check] $name: $(python3 -c "import time; print(f'{time.time() - $t:.1f}')") s: g3align $*"
    if grep -q compiling "$W/$name.err"; then echo "[wheel-check] $name compiled:"; cat "$W/$name.err"; exit 1; fi
}
step index index -p "$W/lambda" data/lambda.fa.gz
step se mem -t 2 "$W/lambda" data/lambda_R1.fq.gz
step pe mem -t 2 "$W/lambda" data/lambda_R1.fq.gz data/lambda_R2.fq.gz
step pb map -t 2 -ax map-pb data/lambda.fa.gz data/lambda_pbsim.fq.gz
for x in se:lambda_se.bwa pe:lambda_pe.bwa pb:lambda_pbsim.mm2; do
    gzip -dc "data/golden/${x#*:}.sam.gz" > "$W/${x%%:*}.gold.sam"
done
g3align compare --strict "$W/se.sam" "$W/se.gold.sam"
g3align compare --strict "$W/pe.sam" "$W/pe.gold.sam"
g3align compare --strict "$W/pb.sam" "$W/pb.gold.sam" --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA
