#!/bin/bash
# `g3align map --device gpu` on the GPU box (issue 6), in one run on the box; results under $OUT.
#   0. (WARM=1) numba's kernels compiled for every mode in parallel processes (WARM_SERIAL=1: one after another;
#      ~150 s for cpu, 270-290 s for gpu-align on a fresh H100 box: set CMD_TIMEOUT above that), beside pbsim (PBSIM=1)
#   1. (TESTS=1; off by default) kernels/ksw2.cu under compute-sanitizer (MEMCHECK=0: skipped), then GPU tests: ksw2
#      kernel == twin, DP chaining kernels == twin, map --device gpu == per-read CPU output
#   2. (KBENCH=1, jobs_*.npz carried) kernels/ksw2.cu on the dumped jobs of real reads (grid sweep, GCUPS, twin;
#      KVARIANTS='default;KSW2_SCALAR=1;KSW2_PROFILE=1' kernel variants (PROFILE: cycles per phase), KTWIN=0 no CPU twin:
#      no numba compilation needed)
#   3. (ECOLI=1) E. coli PacBio / ONT: g3align in each mode of DEVS, minimap2 2.24, all -t 16, same box; every
#      mode's SAM must equal the first mode's; concordance with minimap2
#   4. (PBSIM=1) human chr20, pbsim CLR reads (fixed seed, $PB_DEPTH x): indexes built by both tools, then
#      mapped by both (-ax map-pb -t 16) in each mode of PB_MODES, with per-stage times of g3align (G3ALIGN_STAGES)
#   4b. (MMSEED_CHECK=1, with PBSIM=1) scripts/gpu_mmseed_check.py on the chr20 reads: seeds GPU == CPU twin, timed
#   5. (LCHAIN=1) scripts/gpu_lchain_bench.py: DP chaining kernels on the same anchors (E. coli reads, dense reads)
# Modes: cpu (--device cpu), gpu (--device gpu --cpu-align: sketch, seeds, chaining scores on the GPU, base
# alignment on CPU threads), gpu-align (--device gpu, whose default is the base alignment on the GPU too). DEVS default "cpu gpu gpu-align",
# PB_MODES default "gpu gpu-align cpu"; MODE@NAME=VALUE,... runs MODE with G3ALIGN_TUNE=NAME=VALUE,... (e.g.
# gpu-align@MAP_DEPTH=1); MODE@env:NAME=VALUE,... sets environment variables instead (G3ALIGN_TUNE=A=1+B=2 among them
# applies too, '+' standing for ',': knobs with G3ALIGN_KTIME=1 say). PB_REF: another reference for 4. (default chr20).
# NBCACHE=1: numba's cache carried between calls (.devcache/map/, see below); PYSPY=N: the N-th chr20 run under py-spy
# (PYSPY_FLAGS, PYSPY_RATE); IMPORTTIME=1: `python -X importtime` of map's modules and CuPy (importtime.txt);
# TRACE=1: each chr20 run's G3ALIGN_TRACE timeline (trace.N.json in logs.tgz)
# (wheel in .whl/); each timed run reports its CPU user and sys seconds.
# Needs .devdata/: ecoli_K12_MG1655.fa.gz, the two E. coli read sets, a minimap2 binary; jobs_*.npz for 2.;
# for PBSIM=1 also human_GRCh37_chr20.fa.gz, pbsim and model_qc_clr.
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
mkdir -p /tmp/pkg/g3align && cp g3align/__init__.py /tmp/pkg/g3align/
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg PYTHONSAFEPATH=1 NUMBA_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1
D=.devdata; REF=$D/ecoli_K12_MG1655.fa.gz; T0=$SECONDS; DA=$PWD/$D; NT=${NT:-16}
W=/tmp/pbw; mkdir -p $W
log() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$OUT/times.txt"; }
mode_opts() { case ${1%%@*} in cpu) echo "--device cpu";; gpu) echo "--device gpu --cpu-align";; gpu-align) echo "--device gpu";;
              *) echo "unknown mode $1" >&2; exit 2;; esac; }
g3() { timeout ${CMD_TIMEOUT:-150} python3 -m g3align.aligner.cli "$@"; }
TIMEFORMAT=%R
# NBCACHE=1: numba's on-disk cache travels between calls in $NBCACHE_DIR (default .devcache/map; scripts/nbcache.sh)
NBCACHE_DIR=${NBCACHE_DIR:-.devcache/map}; . scripts/nbcache.sh; nbcache_in; bytecode_in
if [ "${PYSPY:-0}" != 0 ]; then   # py-spy from its wheel in .whl/ (carried)
    pip install -q --no-index --no-deps --target /tmp/site .whl/py_spy*.whl && export PATH=/tmp/site/bin:$PATH
fi
if [ "${IMPORTTIME:-0}" = 1 ]; then   # what map's start-up imports cost on this box (twice: the second is warm)
    for k in 1 2; do python3 -X importtime -c "import g3align.aligner.cli; from g3align.aligner.map import pipeline, align_batch; from g3align.aligner.map.gpu import seed; from g3align.kernels import loader; import cupy; cupy.cuda.runtime.getDeviceCount()" 2> "$OUT/importtime.txt"; done
fi
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader 2>/dev/null | tee "$OUT/device.txt"
PB_REF=${PB_REF:-$D/human_GRCh37_chr20.fa.gz}; R=$W/pb_0001.fastq
pbsim_and_index() {   # chr20 pbsim reads and both tools' indexes (the inputs of 4.)
    zcat -f $PB_REF > $W/ref.fa
    (cd $W && $DA/pbsim --data-type CLR --depth ${PB_DEPTH:-2.5} --model_qc $DA/model_qc_clr --seed 20261125 \
        --prefix pb ref.fa > pbsim.log 2>&1 && rm -f pb_0001.maf pb_0001.ref)
    s=$( { time $D/minimap2 -t $NT -x map-pb -d $W/ref.mmi $W/ref.fa 2>/dev/null; } 2>&1 ); log "minimap2 index: $s s"
    s=$( { time g3 index -x map-pb --no-fm -p $W/g3 $W/ref.fa 2>/dev/null; } 2>&1 ); log "g3align index (numba compile on a fresh box included): $s s"
}
if [ "${WARM:-1}" = 1 ]; then   # compile every mode's kernels at once (one process each)
    # WARM_READS lines of the PacBio set (default 800; the whole set, 12000, also compiles CuPy's kernels for
    # full-size parts, which a first big run otherwise does)
    # (not carried: the shipped lambda pbsim reads, which compile the same code but not CuPy's kernels for
    # full-size parts; the first big run then does that, 20-70 s on a fresh box)
    # WARM_PB=1 (with PBSIM=1): the chr20 pbsim reads and index made first, then WARM_READS lines of those reads
    # (the E. coli PacBio set need not be carried then)
    WSRC=$D/ecoli_K12_pacbio_RSII_first3000.fastq.gz; WREF=$REF
    [ -e $WSRC ] || { WSRC=data/lambda_pbsim.fq.gz; WREF=data/lambda.fa.gz; }
    if [ "${WARM_PB:-0}" = 1 ] && [ "${PBSIM:-0}" = 1 ]; then pbsim_and_index; WSRC=$R; WREF=$W/g3; fi
    zcat -f $WSRC | head -n ${WARM_READS:-800} > $W/warm.fq
    warm() { s=$( { time g3 map -t $NT $(mode_opts $1) -ax map-pb $WREF $W/warm.fq > /dev/null 2> $W/warm.$1.log; } 2>&1 )
             log "warm-up $2$1: $s s ($(grep -c 'E::' $W/warm.$1.log) error lines)"; }
    if [ "${WARM_SERIAL:-0}" = 1 ]; then  # one mode after another (no cache races; slower)
        [ "${PBSIM:-0}" = 1 ] && [ "${WARM_PB:-0}" != 1 ] && pbsim_and_index
        for m in ${DEVS:-cpu gpu gpu-align}; do warm $m; done
    else
        for m in ${DEVS:-cpu gpu gpu-align}; do warm $m & done
        [ "${PBSIM:-0}" = 1 ] && [ "${WARM_PB:-0}" != 1 ] && pbsim_and_index &
        wait
    fi
    # again one after another: concurrent processes overwrite each other's numba cache index files, so a
    # function the parallel pass compiled may be missing from the cache (seen on the H100: the first timed
    # runs then spent 5-80 s compiling); this pass compiles only what was lost
    for m in ${DEVS:-cpu gpu gpu-align}; do warm $m "again, "; done
    log "warm-up done"
elif [ "${PBSIM:-0}" = 1 ]; then pbsim_and_index; fi
if [ "${TESTS:-0}" = 1 ]; then
    # kernels/ksw2.cu (default and the variants) under compute-sanitizer first (MEMCHECK=0: not): host builds cannot see
    # a miscompilation, and one (CUDA 13.0's ptxas on the 32-bit build without KSW2_OPAQUE) read past the scratch
    if [ "${MEMCHECK:-1}" = 1 ]; then
        # MEMCHECK_VARIANTS: the builds to check ("default" is the default build), all four unless set
        for v in ${MEMCHECK_VARIANTS:-default KSW2_SCALAR=1 KSW2_FUSED_S=1 KSW2_IX64=1}; do
            [ "$v" = default ] && v=""
            timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 5 \
                python3 scripts/ksw2_memcheck.py all $v > $W/memcheck.txt 2>&1
            { echo "== ${v:-default}"; cat $W/memcheck.txt; } >> "$OUT/memcheck.txt"   # every variant's report
            log "ksw2 memcheck ${v:-default}: $(grep -h 'ERROR SUMMARY' $W/memcheck.txt || echo 'no summary (failed)')"
        done
    fi
    # PYTEST_ARGS is read as shell words (eval): a -k expression may be quoted in it
    eval "timeout ${PYTEST_TIMEOUT:-400} python3 -m pytest -q ${PYTEST_ARGS:-tests/test_ksw2_gpu.py tests/test_lchain_gpu.py \
        tests/test_map.py -k \"gpu or staged or batch_seeding\"}" > "$OUT/pytest_map.txt" 2>&1
    rc=$?; tail -3 "$OUT/pytest_map.txt"; log "tests done (exit $rc)"
    if [ $rc != 0 ] && [ "${KEEP_GOING:-0}" != 1 ]; then log "GPU tests failed: stopping"; exit 1; fi
fi
if ls $D/jobs_*.npz >/dev/null 2>&1 && [ "${KBENCH:-1}" = 1 ]; then
    timeout 240 python3 scripts/ksw2_jobs.py bench "$OUT" $D/jobs_*.npz --grids ${GRIDS:-16,32,64,128,256} \
        --variants "${KVARIANTS:-default}" $([ "${KTWIN:-1}" = 0 ] && echo --no-twin) 2>&1 \
        | tail -25; log "ksw2 bench done"
fi
# one timed run: mode, preset, reference/index, reads, SAM out, log out
timed() {
    local m=$1 x=$2 ref=$3 reads=$4 sam=$5 lg=$6 tune="" envs=()
    [[ $m == *@* ]] && tune=${m#*@}   # MODE@NAME=VALUE,...: G3ALIGN_TUNE for this run
    if [[ $tune == env:* ]]; then     # MODE@env:NAME=VALUE,...: environment variables for this run instead
        IFS=, read -r -a envs <<< "${tune#env:}"; tune=""
        envs=("${envs[@]//+/,}")   # '+' in a value stands for ',' (G3ALIGN_TUNE=A=1+B=2)
    fi
    local spy=""   # PYSPY=N: the N-th chr20 run sampled by py-spy (PYSPY_FLAGS, default every thread, Python and
    # native frames; "--threads --gil": only the thread holding the GIL, i.e. where the GIL's time goes)
    [ "${PYSPY:-0}" != 0 ] && [ "$7" = chr20 ] && [ "$i" = "$PYSPY" ] && spy="py-spy record -r ${PYSPY_RATE:-200} ${PYSPY_FLAGS:---threads --native} -f raw -o $OUT/pyspy.txt --"
    local tr=""    # TRACE=1: the chr20 runs' stage timelines (G3ALIGN_TRACE JSON, in logs.tgz)
    [ "${TRACE:-0}" = 1 ] && [ "$7" = chr20 ] && tr=$W/trace.$i.json
    local rc=0
    s=$( { TIMEFORMAT='%R s (CPU user %U s, sys %S s)'; time env G3ALIGN_TUNE=$tune "${envs[@]}" G3ALIGN_TRACE=$tr NUMBA_DEBUG_CACHE=${CACHE_DEBUG:-0} G3ALIGN_STAGES=1 timeout ${CMD_TIMEOUT:-150} $spy python3 -m g3align.aligner.cli map -t $NT \
        $(mode_opts $m) -ax $x -o $sam $ref $reads > $lg.stdout 2> $lg; } 2>&1 ) || rc=$?   # -o: py-spy's own lines stay out of the SAM
    # a failed run says so (a run that dies at its workers' start leaves an empty SAM, which the comparisons would
    # call equal to another empty one)
    [ $rc != 0 ] && log "$7 g3align $m FAILED (exit $rc): $(grep -h 'Error' $lg | tail -1)"
    log "$7 g3align $m: $s; $(grep -h 'stage' $lg | tail -1)"
    if [ "${CACHE_DEBUG:-0}" = 1 ]; then   # numba functions compiled (not loaded from the cache) in this run
        # numba prints these on stdout (the SAM goes to -o)
        log "  numba cache misses: $(grep -h '^\[cache\] data saved to' $lg.stdout | sed 's#.*/##; s#-[0-9]*\.py.*##' | sort | uniq -c | tr '\n' ' ')"
    fi
}
same_sam() {  # same records (the @PG command line differs between modes)
    local n; n=$(grep -vc '^@' "$1")
    if [ "$n" = 0 ]; then log "$3: $4 SAM has no records (a failed run?)"
    elif cmp -s <(grep -v '^@PG' "$1") <(grep -v '^@PG' "$2"); then log "$3: $4 SAM == $5 SAM ($n records)"
    else log "$3: $4 SAM != $5 SAM"; fi
}
if [ "${ECOLI:-1}" = 1 ]; then
for x in "map-pb ecoli_K12_pacbio_RSII_first3000" "map-ont ecoli_K12_ont_R9_nanoget"; do
    set -- $x
    [ -e $D/$2.fastq.gz ] || continue
    first=""; i=0
    for m in ${DEVS:-cpu gpu gpu-align}; do   # a mode may appear more than once (repeat runs)
        i=$((i + 1))
        timed $m $1 $REF $D/$2.fastq.gz "$OUT/$1.$i.$m.sam" "$W/$1.$i.$m.log" "$1"
        if [ -z "$first" ]; then first=$i.$m; else same_sam "$OUT/$1.$first.sam" "$OUT/$1.$i.$m.sam" $1 $first $i.$m; fi
    done
    s=$( { time $D/minimap2 -t $NT -ax $1 $REF $D/$2.fastq.gz > "$OUT/$1.mm2.sam" 2>/dev/null; } 2>&1 )
    log "$1 minimap2 -t$NT: $s s"
    g3 compare "$OUT/$1.$first.sam" "$OUT/$1.mm2.sam" --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA 2>&1 | tail -4 \
        | tee -a "$OUT/times.txt"
    rm -f "$OUT"/$1.*.sam
done
fi
if [ "${PBSIM:-0}" = 1 ]; then
    log "pbsim: $(awk 'NR%4==2{n++; b+=length($0)} END{print n" reads, "b" bases"}' $R)"
    s=$( { time $D/minimap2 -t $NT -ax map-pb $W/ref.mmi $R > $W/mm2.sam 2>/dev/null; } 2>&1 ); log "chr20 minimap2 -t$NT: $s s"
    first=""; i=0
    for m in ${PB_MODES:-gpu gpu-align cpu}; do   # a mode may appear more than once (repeat runs)
        i=$((i + 1))
        timed $m map-pb $W/g3 $R $W/run$i.sam $W/pbsim.$i.$m.log chr20
        if [ -z "$first" ]; then
            first=$m; mv $W/run$i.sam $W/first.sam
            g3 compare $W/first.sam $W/mm2.sam --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA 2>&1 | tail -7 | tee -a "$OUT/times.txt"
        else same_sam $W/first.sam $W/run$i.sam chr20 $first "$m (run $i)"; rm -f $W/run$i.sam; fi
    done
    if [ "${MM2_AGAIN:-1}" = 1 ]; then
        s=$( { time $D/minimap2 -t $NT -ax map-pb $W/ref.mmi $R > $W/mm2.sam 2>/dev/null; } 2>&1 ); log "chr20 minimap2 -t$NT again: $s s"
    fi
fi
if [ "${MMSEED_CHECK:-0}" = 1 ] && [ -e $R ]; then   # the chr20 reads' seeds: GPU == CPU twin, timed
    timeout ${MMSEED_TIMEOUT:-240} python3 scripts/gpu_mmseed_check.py $W/ref.fa $R -x map-pb --loop-reads 0 \
        --out "$OUT" 2>&1 | tail -14 | tee -a "$OUT/times.txt"; log "mmseed check done"
fi
if [ "${LCHAIN:-1}" = 1 ]; then
    timeout 150 python3 scripts/gpu_lchain_bench.py --out "$OUT" --ref $REF \
        --reads $D/ecoli_K12_ont_R9_nanoget.fastq.gz:map-ont,$D/ecoli_K12_pacbio_RSII_first3000.fastq.gz:map-pb 2>&1 \
        | tail -6 | tee -a "$OUT/times.txt"; log "lchain bench done"
fi
nbcache_out
tar czf "$OUT/logs.tgz" -C $W $(cd $W && ls *.log *.json *.json.cpu *.json.kernels 2>/dev/null) 2>/dev/null
log "end"
