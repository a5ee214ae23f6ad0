#!/usr/bin/env bash
# `mem` and `map` on one GPU, on every GPU of the box (--gpus N) and on Dask workers (one per GPU), the same inputs
# and -K each time: wall times, whether the records equal the one-GPU run's, each card's peak memory.
#
#   bash scripts/gpu_multi.sh pack          # here: BENCH_DIR (.devdata/bmulti) with chr20, dwgsim, pbsim, wheels
#   bash scripts/gpu_multi.sh run           # on the box (carry BENCH_DIR and, if built, .devcache/wc.txz)
#
# PAIRS (2000000) simulated pairs 2x150 (dwgsim, 16 pieces), pbsim CLR at DEPTH (1) of chr20; THREADS (all cores)
# shared by the GPU workers; REPEAT (2) runs of each command; ONLY: a space-separated subset of
# "pe se map dask". Results: OUT/multi.tsv (one line per run) and the runs' stderr.
set -eo pipefail
B=${BENCH_DIR:-.devdata/bmulti}
if [ "$1" = pack ]; then
    mkdir -p "$B/bin" "$B/whl"
    for t in dwgsim pbsim; do cp "$(command -v $t)" "$B/bin/"; done
    cp /usr/share/pbsim/models/model_qc_clr "$B/"
    cp ../shared/data/ref/human_GRCh37_chr20.fa.gz "$B/"
    python3 -m pip download -q --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --platform manylinux2014_x86_64 -d "$B/whl" "distributed>=2023.1" click tqdm pydivsufsort
    du -sh "$B"
    exit 0
fi
W=${WORK:-/tmp/g3multi}; OUT=${OUT:-gpu_out}; PAIRS=${PAIRS:-2000000}; DEPTH=${DEPTH:-1}; REPEAT=${REPEAT:-2}
THREADS=${THREADS:-$(nproc)}; ONLY=${ONLY:-pe se map dask}
mkdir -p "$W" "$OUT"
say() { echo "[multi] $(date +%T) $*" | tee -a "$OUT/progress.log"; }
. scripts/box_env.sh "$B"
if [ ! -d /tmp/wc ]; then  # a numba cache built on the VM for Python 3.12 (G3ALIGN_CPU=portable), if carried
    if [ -f .devcache/wc.txz ]; then tar xJf .devcache/wc.txz -C /tmp; elif [ -f .devcache/wc.tgz ]; then tar xzf .devcache/wc.tgz -C /tmp; fi
fi
[ -d /tmp/wc ] && export G3ALIGN_CPU=portable G3ALIGN_CACHE_DIR=/tmp/wc
G3="python3 -m g3align.aligner.cli"
NG=$(nvidia-smi -L | wc -l)
echo "[multi] $NG GPUs, $(nproc) cores, $THREADS threads; $(nvidia-smi -L | head -1)"

t=$(date +%s)
[ -f "$W/chr20.fa" ] || zcat "$B/human_GRCh37_chr20.fa.gz" > "$W/chr20.fa"
[ -f "$W/chr20.fa.g3i" ] || $G3 index "$W/chr20.fa" 2> "$OUT/index.err"
if [ ! -f "$W/r2.fq" ]; then
    per=$((PAIRS / 16))
    for i in $(seq 0 15); do
        dwgsim -z $((21 + i)) -N $per -1 150 -2 150 -e 0.002 -E 0.002 -r 0.001 -y 0 -o 1 "$W/chr20.fa" "$W/d$i" \
            >/dev/null 2>&1 &
    done
    wait
    for e in 1 2; do for i in $(seq 0 15); do zcat "$W/d$i.bwa.read$e.fastq.gz"; done > "$W/r$e.fq"; done
    rm -f "$W"/d*
fi
if [ ! -f "$W/pb.fq" ]; then
    model=$(readlink -f "$B/model_qc_clr")
    mkdir -p "$W/pb" && (cd "$W/pb" && pbsim --data-type CLR --model_qc "$model" --depth "$DEPTH" --seed 3 \
        "$W/chr20.fa" > pbsim.log 2>&1)
    cat "$W"/pb/sd_*.fastq > "$W/pb.fq"; rm -rf "$W/pb"
fi
say "inputs ready in $(( $(date +%s) - t )) s: $(( $(wc -l < "$W/r1.fq") / 4 )) pairs, $(( $(wc -l < "$W/pb.fq") / 4 )) long reads"

# peak used memory of each GPU while a command runs (nvidia-smi every 0.5 s)
gpumem() {
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 > "$1" &
    echo $!
}
body() { grep -v '^@PG' "$1" | md5sum | cut -c1-12; }
echo -e "what\trun\tseconds\tbody\tpeak MiB per GPU" > "$OUT/multi.tsv"
run() {  # NAME RUN OUTFILE COMMAND...
    local name=$1 k=$2 sam=$3; shift 3
    local mp; mp=$(gpumem "$W/mem.$name")
    local t0; t0=$(date +%s.%N)
    "$@" > "$sam" 2> "$OUT/$name.$k.err" || { echo "[multi] $name failed"; tail -5 "$OUT/$name.$k.err"; }
    local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
    kill "$mp" 2>/dev/null || true
    pkill -f multiprocessing-fork 2>/dev/null || true  # workers left by a command that timed out
    local peaks; peaks=$(sort -t, -k1,1n -k2,2n "$W/mem.$name" | awk -F', ' '{m[$1]=$2>m[$1]?$2:m[$1]} END {for (i in m) printf "%s ", m[i]}')
    echo -e "$name\t$k\t$dt\t$(body "$sam")\t$peaks" | tee -a "$OUT/multi.tsv"
}
K=${K:-100000000}
TM=${TM:-200}  # seconds allowed to one command
# warm-up (CuPy's kernel cache, the page cache): 100k pairs on one GPU and on all
head -400000 "$W/r1.fq" > "$W/w1.fq"; head -400000 "$W/r2.fq" > "$W/w2.fq"
say warm-up
timeout "$TM" $G3 mem -t "$THREADS" "$W/chr20.fa" "$W/w1.fq" "$W/w2.fq" > /dev/null 2> "$OUT/warm1.err" || tail -3 "$OUT/warm1.err"
timeout "$TM" $G3 mem -t "$THREADS" --gpus "$NG" "$W/chr20.fa" "$W/w1.fq" "$W/w2.fq" > /dev/null 2> "$OUT/warm2.err" || tail -3 "$OUT/warm2.err"
say runs
for k in $(seq 1 "$REPEAT"); do
    case " $ONLY " in *" pe "*)
        run "pe-1gpu" $k "$W/pe1.sam" timeout "$TM" $G3 mem -t "$THREADS" -K "$K" "$W/chr20.fa" "$W/r1.fq" "$W/r2.fq"
        run "pe-${NG}gpu" $k "$W/pe$NG.sam" timeout "$TM" $G3 mem -t "$THREADS" -K "$K" --gpus "$NG" "$W/chr20.fa" "$W/r1.fq" "$W/r2.fq"
    ;; esac
done
case " $ONLY " in *" map "*)
    run "mappb-1gpu" 1 "$W/pb1.sam" timeout "$TM" $G3 map -ax map-pb -t "$THREADS" "$W/chr20.fa" "$W/pb.fq"
    run "mappb-${NG}gpu" 1 "$W/pb$NG.sam" timeout "$TM" $G3 map -ax map-pb -t "$THREADS" --gpus "$NG" "$W/chr20.fa" "$W/pb.fq"
;; esac
case " $ONLY " in *" se "*)
    run "se-1gpu" 1 "$W/se1.sam" timeout "$TM" $G3 mem -t "$THREADS" "$W/chr20.fa" "$W/r1.fq"
    run "se-${NG}gpu" 1 "$W/se$NG.sam" timeout "$TM" $G3 mem -t "$THREADS" --gpus "$NG" "$W/chr20.fa" "$W/r1.fq"
;; esac
case " $ONLY " in *" dask "*)
    # a scheduler and one worker per GPU (each sees its GPU only), one task at a time per worker
    python3 -m distributed.cli.dask_scheduler --port 8786 --no-dashboard > "$OUT/dask-scheduler.err" 2>&1 &
    sleep 3
    for g in $(seq 0 $((NG - 1))); do
        CUDA_VISIBLE_DEVICES=$g python3 -m distributed.cli.dask_worker tcp://127.0.0.1:8786 --nthreads 1 \
            --memory-limit 0 --no-dashboard --name "gpu$g" > "$OUT/dask-worker$g.err" 2>&1 &
    done
    sleep 8
    per=$((THREADS / NG))
    say dask
    run "pe-dask${NG}" 1 "$W/pedask.sam" timeout "$TM" $G3 mem -t "$per" -K "$K" --scheduler tcp://127.0.0.1:8786 "$W/chr20.fa" "$W/r1.fq" "$W/r2.fq"
    pkill -f distributed.cli.dask_worker || true
    sleep 2
    CUDA_VISIBLE_DEVICES=0 python3 -m distributed.cli.dask_worker tcp://127.0.0.1:8786 --nthreads 1 --memory-limit 0 \
        --no-dashboard --name gpu0 > "$OUT/dask-worker1only.err" 2>&1 &
    sleep 8
    run "pe-dask1" 1 "$W/pedask1.sam" timeout "$TM" $G3 mem -t "$per" -K "$K" --scheduler tcp://127.0.0.1:8786 "$W/chr20.fa" "$W/r1.fq" "$W/r2.fq"
    pkill -f distributed.cli || true
;; esac
cat "$OUT/multi.tsv"
