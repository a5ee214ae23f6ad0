#!/bin/bash
# The FM-index built on the GPU, up to the whole-genome stand-in (docs/BENCHMARKS.md "The FM-index on the GPU").
#   bash scripts/gpu_index.sh pack   here: .devdata/wg (the stand-in's sources from ../shared/data, bwa, wgsim and its
#                                    libraries, the pydivsufsort wheel): ~40 MB, under the 64 MiB a call carries
#   bash scripts/gpu_index.sh run    on the box (carry .devdata/wg), in the background (setsid) so that it outlives one
#                                    call: chr20's index on the GPU against the CPU's (md5 sums made by pack); the
#                                    3.1 Gbp stand-in (scripts/wg_ref.py), its GPU index with bwa's files, a walk of that
#                                    index against the text (scripts/fm_walk.py); the suffix sort's GPU tests; with
#                                    NPAIRS=N also N wgsim pairs through `g3align mem` and `bwa mem -t THREADS` on
#                                    those files, compared record by record
#   bash scripts/gpu_index.sh wait S on the box: wait up to S seconds for run to end; the log and results to $OUT
# Everything lands in $W (/tmp/g3wg): log (one line a stage, with wall time and peak RSS), gpumem.txt.
set -eo pipefail
P=${WG_DIR:-.devdata/wg}
W=${WORK:-/tmp/g3wg}
case "${1:-}" in
pack)
    D=${SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
    rm -rf $P; mkdir -p $P/src $P/bin $P/lib $P/whl
    cp $D/ref/{human_GRCh37_chr20,ecoli_K12_MG1655,lambda_phage_NC_001416,hiv1_iva_reference,honeybee_viruses_DWV_VDV1,human_MT}.fa.gz $P/src/
    for b in bwa wgsim; do cp "$(command -v $b)" $P/bin/; done
    for l in libhts.so.3 libdeflate.so.0 libhtscodecs.so.2; do cp -L /lib/x86_64-linux-gnu/$l $P/lib/; done
    cp .devdata/same/whl/pydivsufsort-*.whl $P/whl/
    # the CPU's (divsufsort) chr20 index, as md5 sums: the GPU's must be the same bytes
    zcat $P/src/human_GRCh37_chr20.fa.gz > /tmp/g3pack_chr20.fa
    g3align index --device cpu --bwa -p /tmp/g3pack_c20 /tmp/g3pack_chr20.fa
    (cd /tmp && md5sum g3pack_c20.{amb,ann,bwt,pac,sa} | sed 's/g3pack_c20\./X./') > $P/chr20.md5
    python3 -c 'import hashlib, sys, numpy as np
from g3align.index.store import load_index
ref, fm = load_index(sys.argv[1]); h = hashlib.md5()
for k in ("occ", "sa", "C1", "C2"): h.update(np.ascontiguousarray(getattr(fm, k)).tobytes())
print(h.hexdigest(), fm.primary, fm.row_sa1)' /tmp/g3pack_c20 > $P/chr20.fm.md5
    rm -f /tmp/g3pack_c20.* /tmp/g3pack_chr20.fa
    du -sh $P
    ;;
run)
    mkdir -p $W; : > $W/log
    setsid bash "$0" stages > $W/stages.out 2>&1 < /dev/null &
    echo "started (log: $W/log)"
    ;;
stages)
    source scripts/box_env.sh $P
    chmod +x $P/bin/*
    export LD_LIBRARY_PATH="$PWD/$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    G3="python3 -m g3align.aligner.cli"
    T=${THREADS:-$(nproc)}
    DEV=${DEV:-gpu}   # DEV=cpu WG_SIZE=2e7 NPAIRS=20000: a dry run of the script on a machine without a GPU
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > $W/gpumem.txt 2>/dev/null &
    note() { echo "$*" >> $W/log; }
    # timed NAME CMD...: wall time and peak RSS of CMD (stdout to $W/NAME.out, stderr to $W/NAME.err)
    timed() {
        local name=$1; shift
        python3 -c 'import resource, subprocess, sys, time
t = time.time(); r = subprocess.call(sys.argv[3:], stderr=open(sys.argv[1], "w"), stdout=open(sys.argv[2], "w"))
print(f"{time.time() - t:.1f} s wall, peak RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6:.2f} GB, rc {r}")
sys.exit(r)' "$W/$name.err" "$W/$name.out" "$@" > $W/$name.time && note "$name: $(cat $W/$name.time)" \
            || { note "$name: FAILED $(cat $W/$name.time) $(tail -3 $W/$name.err | tr '\n' ' ')"; return 1; }
    }
    note "device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader), $(nproc) cores"
    # chr20 on the GPU against the CPU's (divsufsort) files: their md5 sums, made by `pack`
    zcat $P/src/human_GRCh37_chr20.fa.gz > $W/chr20.fa
    timed chr20-gpu $G3 index --device $DEV --bwa -p $W/c20 $W/chr20.fa || true
    M=$PWD/$P
    (cd $W && sed 's/X\./c20./' $M/chr20.md5 | md5sum -c --quiet) && note "chr20 bwa files identical to the CPU's" \
        || note "chr20 bwa files DIFFER"
    python3 -c 'import hashlib, sys, numpy as np
from g3align.index.store import load_index
ref, fm = load_index(sys.argv[1]); h = hashlib.md5()
for k in ("occ", "sa", "C1", "C2"): h.update(np.ascontiguousarray(getattr(fm, k)).tobytes())
print(h.hexdigest(), fm.primary, fm.row_sa1)' $W/c20 > $W/c20.fm.md5 || true
    cmp -s $W/c20.fm.md5 $P/chr20.fm.md5 && note "chr20 .g3i FM arrays identical to the CPU's" || note "chr20 .g3i FM DIFFERS"
    grep -h "suffix" $W/chr20-gpu.err >> $W/log || true
    rm -f $W/c20.*

    timed wg-ref python3 scripts/wg_ref.py --data $P/src --out $W/wg --jobs $T --size ${WG_SIZE:-3.1e9} || true
    timed wg-index $G3 index --device $DEV --bwa $W/wg/wg.fa || true
    grep -h "M::index" $W/wg-index.err >> $W/log || true
    ls -l $W/wg/ >> $W/log
    timed wg-walk python3 scripts/fm_walk.py $W/wg/wg.fa ${WALK:-20000000} || true
    cat $W/wg-walk.err >> $W/log || true

    timed tests python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_sufsort.py || true
    tail -3 $W/tests.out >> $W/log || true

    if [ -n "$NPAIRS" ]; then   # mem at scale: NPAIRS wgsim pairs, g3align mem and bwa mem on the GPU-built files
        timed wgsim wgsim -S 7 -N $NPAIRS -1 150 -2 150 -e 0.01 $W/wg/wg.fa $W/r1.fq $W/r2.fq
        timed g3-mem env G3ALIGN_STAGES=1 $G3 mem -t $T --device $DEV $W/wg/wg.fa $W/r1.fq $W/r2.fq || true
        grep -h -i "index\|stage\|real\|total" $W/g3-mem.err | tail -12 >> $W/log || true
        timed bwa-mem bwa mem -t $T $W/wg/wg.fa $W/r1.fq $W/r2.fq || true
        grep -h "Real time" $W/bwa-mem.err >> $W/log || true
        timed compare $G3 compare $W/bwa-mem.out $W/g3-mem.out || true
        head -30 $W/compare.out $W/compare.err >> $W/log || true
    fi
    note "peak GPU memory used: $(sort -n $W/gpumem.txt | tail -1) MiB"
    note "done"
    kill %1 2>/dev/null || true
    ;;
wait)
    end=$((SECONDS + ${2:-500}))
    while [ $SECONDS -lt $end ] && pgrep -f "gpu_index.sh stages" > /dev/null; do sleep 3; done
    mkdir -p "${OUT:-gpu_out}"; cp $W/log $W/*.err $W/stages.out "${OUT:-gpu_out}/" 2>/dev/null || true
    cat $W/log
    ;;
*)
    sed -n '2,12p' "$0"; exit 2
    ;;
esac
