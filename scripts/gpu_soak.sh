#!/bin/bash
# The long-run soak of `g3align mem` on the GPU box: PAIRS dwgsim pairs 2x150 on human chr20, one paired-end GPU run
# with its host RSS and the GPU's memory sampled every second, then `bwa mem` with the same -t on the same reads and
# the two SAM bodies compared byte for byte. Carry .devdata/soak (human_GRCh37_chr20.fa.gz and Debian's bwa and
# dwgsim binaries) and .whl (click, tqdm, pydivsufsort wheels). The box keeps /tmp/soak between calls while warm:
#   PHASE=run  simulate, index (bwa's in the background), a small warm-up run (the first run compiles), the sampled
#              run, then bwa mem started in the background (setsid);
#   PHASE=cmp  wait for bwa (WAIT seconds at most), compare, summarise.   Results under $OUT.
# BWA=0: no bwa at all (the memory runs). PHASE=again: the sampled run alone, on the inputs of an earlier PHASE=run.
# TWICE=1: the reads twice over (a run twice as long). A sampled run's SAM body is compared with the other kinds' (ENVX,
# TWICE) kept from earlier runs.
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
PAIRS=${PAIRS:-10000000}; T=$(nproc); W=/tmp/soak; S=$PWD/.devdata/soak; REF=${REF:-$S/human_GRCh37_chr20.fa.gz}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/click-*.whl .whl/tqdm-*.whl \
    .whl/pydivsufsort-*.whl >/dev/null 2>&1 || echo "wheels not installed"
mkdir -p /tmp/pkg/g3align "$W"
for f in g3align/*; do ln -sfn "$PWD/$f" /tmp/pkg/g3align/; done
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1 G3ALIGN_DETACH=0
G3="${PY:-python3} -m g3align.aligner.cli"
TAG=trim  # (the device pool's free blocks go back to CUDA after every -K batch: pipeline.trim_pool)
# the sampled run: host RSS of the process (and any children) and the GPU's used memory, once a second
sampled() {
    local run="$G3"
    ts=$(date +%s.%N)
    local x=""; [ "${TWICE:-0}" = 1 ] && x=x2
    [ -z "$x" ] || [ -f $W/r2x2.fq.gz ] || { cat $W/r1.fq.gz $W/r1.fq.gz > $W/r1x2.fq.gz; cat $W/r2.fq.gz $W/r2.fq.gz > $W/r2x2.fq.gz; }
    TAG=$TAG${ENVX:+m}$x  # ENVX: environment settings for the sampled run (e.g. glibc's MALLOC_MMAP_THRESHOLD_)
    eval "G3ALIGN_STAGES=1 $ENVX $run mem -t $T $W/g3 $W/r1$x.fq.gz $W/r2$x.fq.gz > $W/g_$TAG.sam 2> $W/g_$TAG.err &"
    pid=$!
    echo "t_s,rss_mib,gpu_mib" > "$OUT/soak_samples_$TAG.csv"
    while kill -0 $pid 2>/dev/null; do
        rss=$( (ps -o rss= -p $pid; ps -o rss= --ppid $pid) | awk '{s+=$1} END {printf "%d", s/1024}')
        gpu=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
        echo "$(awk -v a=$(date +%s.%N) -v b=$ts 'BEGIN {printf "%.1f", a - b}'),$rss,$gpu" >> "$OUT/soak_samples_$TAG.csv"
        sleep 1
    done
    wait $pid; rc=$?
    echo "g3align ($TAG) rc $rc, wall $(awk -v a=$(date +%s.%N) -v b=$ts 'BEGIN {printf "%.1f", a - b}') s"
    grep -E "Processed" $W/g_$TAG.err | tail -1
    grep -E "M::pool" $W/g_$TAG.err | sed -n '1p;$p'  # CuPy's pool after the first and the last -K batch
    cp $W/g_$TAG.err "$OUT/g3align_stderr_$TAG.txt"
    awk -F, 'NR > 1 {if ($3 > g) g = $3; if ($2 > r) r = $2} END {print "peak GPU used " g " MiB, peak RSS " r " MiB"}' \
        "$OUT/soak_samples_$TAG.csv"
    ln -sfn g_$TAG.sam $W/g.sam
    for o in keep$x trim$x keepm$x trimm$x; do
        if [ $o != $TAG ] && [ -f $W/g_$o.sam ]; then
            cmp <(body $W/g_$o.sam) <(body $W/g_$TAG.sam) > /dev/null && echo "SAM bodies $o = $TAG" || echo "SAM bodies $o != $TAG"
        fi
    done
}
chmod +x "$S/bwa" "$S/dwgsim"
body() { grep -v '^@' "$1"; }
if [ "${PHASE:-run}" = run ]; then
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
    t0=$SECONDS
    zcat "$REF" > $W/ref.fa
    [ "${BWA:-1}" = 0 ] || (cd $W && setsid "$S/bwa" index ref.fa > bwa_index.log 2>&1; echo $? > bwa_index.rc) &
    per=$(( (PAIRS + T - 1) / T ))
    for i in $(seq 1 $T); do
        "$S/dwgsim" -z $i -N $per -1 150 -2 150 -e 0.002 -E 0.002 -r 0.001 -y 0 -o 1 $W/ref.fa $W/sim$i >/dev/null 2>&1 &
    done
    $G3 index -p $W/g3 $W/ref.fa 2>&1 | tail -2
    wait
    cat $(ls $W/sim*.bwa.read1.fastq.gz | sort -V) > $W/r1.fq.gz
    cat $(ls $W/sim*.bwa.read2.fastq.gz | sort -V) > $W/r2.fq.gz
    rm -f $W/sim*.fastq.gz
    echo "inputs ready in $((SECONDS - t0)) s: $(du -h $W/r1.fq.gz | cut -f1) x 2"
    zcat $W/r1.fq.gz | head -400000 > $W/w1.fq; zcat $W/r2.fq.gz | head -400000 > $W/w2.fq
    t1=$SECONDS
    $G3 mem -t $T $W/g3 $W/w1.fq $W/w2.fq > $W/w.sam 2> $W/w.err; echo "warm-up run (compiles): rc $? in $((SECONDS - t1)) s"
    sampled
    [ "${BWA:-1}" = 0 ] && exit 0
    until [ -f $W/bwa_index.rc ]; do sleep 2; done
    (cd $W && setsid bash -c "s=\$(date +%s); '$S/bwa' mem -t $T ref.fa r1.fq.gz r2.fq.gz > bwa.sam 2> bwa.err; \
        echo \$? \$(( \$(date +%s) - s )) > bwa.rc" > /dev/null 2>&1 < /dev/null &)
    echo "bwa mem started at $((SECONDS - t0)) s"
elif [ "$PHASE" = again ]; then
    t1=$SECONDS
    $G3 mem -t $T $W/g3 $W/w1.fq $W/w2.fq > $W/w.sam 2> $W/w.err; echo "warm-up run: rc $? in $((SECONDS - t1)) s"
    sampled
else
    t0=$SECONDS
    until [ -f $W/bwa.rc ] || [ $((SECONDS - t0)) -gt ${WAIT:-400} ]; do sleep 2; done
    [ -f $W/bwa.rc ] || { echo "bwa not done after $((SECONDS - t0)) s"; exit 1; }
    echo "bwa rc and wall s: $(cat $W/bwa.rc), waited $((SECONDS - t0)) s"
    grep -E "Processed [0-9]+ reads in" $W/bwa.err | tail -1
    n_g=$(body $W/g.sam | wc -l); n_b=$(body $W/bwa.sam | wc -l)
    echo "records: g3align $n_g, bwa $n_b"
    if cmp <(body $W/g.sam) <(body $W/bwa.sam) > $W/cmp.txt 2>&1; then echo "SAM bodies identical"; else
        echo "SAM bodies differ: $(cat $W/cmp.txt)"
        diff <(body $W/g.sam) <(body $W/bwa.sam) | head -40 > "$OUT/soak_diff.txt"
    fi
fi
