#!/bin/bash
# `g3align map --device gpu` on the GPU box (issue 6), in one call; results under $OUT.
#   1. GPU tests: ksw2 kernel == twin, DP chaining kernels == twin, map --device gpu == per-read CPU output
#   2. kernels/ksw2.cu on the dumped jobs of real reads (scripts/ksw2_jobs.py bench: grid sweep, GCUPS, twin)
#   3. E. coli PacBio / ONT: g3align --device cpu and gpu, minimap2 2.24, all -t 16, same box; GPU SAM must
#      equal CPU SAM; concordance with minimap2
#   4. (PBSIM=1) human chr20, pbsim CLR reads (fixed seed, $PB_DEPTH x): indexes built by both tools, then
#      mapped by both (-ax map-pb -t 16), with per-stage times of g3align (G3ALIGN_STAGES)
# GPU_ALIGN=0: the GPU runs align per read on the CPU (map's default) instead of --gpu-align.
# Needs .devdata/: ecoli_K12_MG1655.fa.gz, the two E. coli read sets, jobs_*.npz (ksw2_jobs.py dump), a
# minimap2 binary; for PBSIM=1 also human_GRCh37_chr20.fa.gz, pbsim and model_qc_clr.
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
mkdir -p /tmp/pkg/g3align && cp g3align/__init__.py /tmp/pkg/g3align/
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg PYTHONSAFEPATH=1 NUMBA_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1
D=.devdata; REF=$D/ecoli_K12_MG1655.fa.gz; T0=$SECONDS
GPU_ALIGN_OPT=$([ "${GPU_ALIGN:-1}" = 1 ] && echo --gpu-align)   # the GPU runs align on the GPU too
log() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$OUT/times.txt"; }
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee "$OUT/device.txt"
if [ "${TESTS:-1}" = 1 ]; then
    timeout ${PYTEST_TIMEOUT:-400} python3 -m pytest -q ${PYTEST_ARGS:-tests/test_ksw2_gpu.py tests/test_lchain_gpu.py \
        tests/test_map.py -k "gpu or staged or batch_seeding"} > "$OUT/pytest_map.txt" 2>&1
    rc=$?; tail -3 "$OUT/pytest_map.txt"; log "tests done (exit $rc)"
    if [ $rc != 0 ] && [ "${KEEP_GOING:-0}" != 1 ]; then log "GPU tests failed: stopping"; exit 1; fi
fi
if ls $D/jobs_*.npz >/dev/null 2>&1 && [ "${KBENCH:-1}" = 1 ]; then
    timeout 240 python3 scripts/ksw2_jobs.py bench "$OUT" $D/jobs_*.npz --grids ${GRIDS:-16,32,64,128,256} 2>&1 \
        | tail -25; log "ksw2 bench done"
fi
TIMEFORMAT=%R
g3() { timeout ${CMD_TIMEOUT:-150} python3 -m g3align.aligner.cli "$@"; }
if [ "${ECOLI:-1}" = 1 ]; then
for x in "map-pb ecoli_K12_pacbio_RSII_first3000" "map-ont ecoli_K12_ont_R9_nanoget"; do
    set -- $x
    [ -e $D/$2.fastq.gz ] || continue
    for dev in ${ECOLI_DEVS:-cpu gpu}; do   # first run of each compiles (numba / CUDA); the second is timed
        ga=""; [ $dev = gpu ] && ga=$GPU_ALIGN_OPT
        g3 map -t 16 --device $dev $ga -ax $1 $REF $D/$2.fastq.gz > /dev/null 2>&1
        s=$( { time G3ALIGN_STAGES=1 timeout 150 python3 -m g3align.aligner.cli map -t 16 --device $dev $ga -ax $1 $REF \
            $D/$2.fastq.gz > "$OUT/$1.$dev.sam" 2> "$OUT/$1.$dev.log"; } 2>&1 )
        log "$1 g3align --device $dev: $s s; $(grep -h 'stage' "$OUT/$1.$dev.log" | tail -1)"
    done
    s=$( { time $D/minimap2 -t 16 -ax $1 $REF $D/$2.fastq.gz > "$OUT/$1.mm2.sam" 2>/dev/null; } 2>&1 )
    log "$1 minimap2 -t16: $s s"
    if [ -e "$OUT/$1.cpu.sam" ]; then
        if cmp -s <(grep -v '^@PG' "$OUT/$1.cpu.sam") <(grep -v '^@PG' "$OUT/$1.gpu.sam"); then   # @PG CL differs
            log "$1: GPU SAM == CPU SAM ($(grep -vc '^@' "$OUT/$1.gpu.sam") records, header but @PG too)"
        else log "$1: GPU SAM != CPU SAM"; fi
    fi
    g3 compare "$OUT/$1.gpu.sam" "$OUT/$1.mm2.sam" --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA 2>&1 | tail -4 \
        | tee -a "$OUT/times.txt"
    rm -f "$OUT/$1.cpu.sam" "$OUT/$1.mm2.sam" "$OUT/$1.gpu.sam"
done
fi
if [ "${PBSIM:-0}" = 1 ]; then
    W=/tmp/chr20; mkdir -p $W; zcat $D/human_GRCh37_chr20.fa.gz > $W/chr20.fa; DA=$PWD/$D
    (cd $W && $DA/pbsim --data-type CLR --depth ${PB_DEPTH:-2.4} --model_qc $DA/model_qc_clr --seed 20261125 \
        --prefix pb chr20.fa > pbsim.log 2>&1)
    R=$W/pb_0001.fastq
    log "pbsim: $(awk 'NR%4==2{n++; b+=length($0)} END{print n" reads, "b" bases"}' $R)"
    s=$( { time $D/minimap2 -t 16 -x map-pb -d $W/chr20.mmi $W/chr20.fa 2>/dev/null; } 2>&1 ); log "minimap2 index: $s s"
    s=$( { time g3 index -x map-pb --no-fm -p $W/g3 $W/chr20.fa 2>/dev/null; } 2>&1 ); log "g3align index: $s s"
    head -n 2000 $R > $W/warm.fq; g3 map -t 16 --device gpu $GPU_ALIGN_OPT -ax map-pb $W/g3 $W/warm.fq > /dev/null 2>&1
    s=$( { time $D/minimap2 -t 16 -ax map-pb $W/chr20.mmi $R > $W/mm2.sam 2>/dev/null; } 2>&1 ); log "minimap2 map: $s s"
    s=$( { time G3ALIGN_STAGES=1 timeout 150 python3 -m g3align.aligner.cli map -t 16 --device gpu $GPU_ALIGN_OPT \
        -ax map-pb $W/g3 $R \
        > $W/gpu.sam 2> $OUT/pbsim.gpu.log; } 2>&1 ); log "g3align map --device gpu: $s s; $(grep -h stage $OUT/pbsim.gpu.log | tail -1)"
    g3 compare $W/gpu.sam $W/mm2.sam --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA 2>&1 | tail -4 | tee -a "$OUT/times.txt"
    if [ "${PB_CPU:-0}" = 1 ]; then
        s=$( { time g3 map -t 16 --device cpu -ax map-pb $W/g3 $R > $W/cpu.sam 2>/dev/null; } 2>&1 )
        log "g3align map --device cpu: $s s"
        cmp -s <(grep -v '^@PG' $W/cpu.sam) <(grep -v '^@PG' $W/gpu.sam) && log "chr20: GPU SAM == CPU SAM" \
            || log "chr20: GPU SAM != CPU SAM"
    fi
fi
log "end"
