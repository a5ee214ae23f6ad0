#!/bin/bash
# `g3align map --device gpu` on the GPU box (issue 6): GPU tests of the map path, then E. coli PacBio
# and ONT mapped with --device cpu, --device gpu and minimap2 2.24 (all -t 16) in the same run; the
# two g3align outputs must be byte-identical.  Needs .devdata/ with ecoli_K12_MG1655.fa.gz, the two
# read sets (../shared/data/reads) and a minimap2 binary.  Results under $OUT.
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
mkdir -p /tmp/pkg/g3align && cp g3align/__init__.py /tmp/pkg/g3align/
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg PYTHONSAFEPATH=1 NUMBA_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1
timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -q tests/test_map.py tests/test_lchain_gpu.py \
    -k "gpu_seeding or batch_seeding or gpu_kernel or gpu_warp" 2>&1 | tail -3 \
    | tee "$OUT/pytest_map.txt"
D=.devdata; REF=$D/ecoli_K12_MG1655.fa.gz
TIMEFORMAT=%R
for x in "map-pb ecoli_K12_pacbio_RSII_first3000" "map-ont ecoli_K12_ont_R9_nanoget"; do
    set -- $x
    for dev in cpu gpu; do       # first run of each compiles (numba / CUDA); the second is timed
        python3 -m g3align.aligner.cli map -t 16 --device $dev -ax $1 $REF $D/$2.fastq.gz > /dev/null 2>&1
        s=$( { time python3 -m g3align.aligner.cli map -t 16 --device $dev -ax $1 $REF $D/$2.fastq.gz \
            > "$OUT/$1.$dev.sam" 2> "$OUT/$1.$dev.log"; } 2>&1 )
        echo "$1 g3align --device $dev: $s s" | tee -a "$OUT/times.txt"
    done
    s=$( { time $D/minimap2 -t 16 -ax $1 $REF $D/$2.fastq.gz > "$OUT/$1.mm2.sam" 2>/dev/null; } 2>&1 )
    echo "$1 minimap2 -t16: $s s" | tee -a "$OUT/times.txt"
    if cmp -s <(grep -v '^@PG' "$OUT/$1.cpu.sam") <(grep -v '^@PG' "$OUT/$1.gpu.sam"); then   # @PG CL differs
        echo "$1: GPU SAM == CPU SAM ($(grep -vc '^@' "$OUT/$1.gpu.sam") records, header but @PG too)"
    else echo "$1: GPU SAM != CPU SAM"; fi | tee -a "$OUT/times.txt"
    python3 -m g3align.aligner.cli compare "$OUT/$1.gpu.sam" "$OUT/$1.mm2.sam" \
        --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA 2>&1 | tail -4 | tee -a "$OUT/times.txt"
    rm -f "$OUT/$1.cpu.sam" "$OUT/$1.mm2.sam"; gzip -f "$OUT/$1.gpu.sam"
done
# the two DP chaining kernels on the same anchors (real E. coli seeds + synthetic dense reads)
timeout 300 python3 scripts/gpu_lchain_bench.py --out "$OUT" --ref $REF \
    --reads $D/ecoli_K12_ont_R9_nanoget.fastq.gz:map-ont,$D/ecoli_K12_pacbio_RSII_first3000.fastq.gz:map-pb 2>&1 \
    | tail -6 | tee -a "$OUT/times.txt"
