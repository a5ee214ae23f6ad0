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
#                                    (MAP="map-pb ..." PBDEPTH=D: pbsim reads through minimap2 and g3align map; TESTS=
#                                    "tests/..." GPU tests; CHR20=0, WALK=0, FM=0: those stages left out; REUSE=1: the
#                                    stand-in and its index of an earlier run on this box kept; SECOND=1: g3align twice,
#                                    SECOND_MEM=0: not for mem; SR=1: the NPAIRS pairs also through minimap2 -ax sr and
#                                    g3align map -ax sr (GA=1: also with --gpu-align); MEM=0: those pairs not through
#                                    mem; SR_T="1 4 16": g3align map -ax sr's mapping of SR_PAIRS of them (200,000) at
#                                    those thread counts, from an sr index saved first)
#   bash scripts/gpu_index.sh pack-cache  here: numba's cache for the box's Python (NBDIR), carried in $P/nb.txz
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
    for b in bwa wgsim minimap2 pbsim; do cp "$(command -v $b)" $P/bin/; done
    cp /usr/share/pbsim/models/model_qc_clr $P/bin/
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
pack-cache)   # numba's cache of this tree for the box (Python 3.12, numba 0.68, G3ALIGN_CPU=portable), into $P/nb.txz
    # NBDIR: a G3ALIGN_CACHE_DIR that `jit.precompile([...])` filled under that Python (its numba/<tree>-x86-64-v3)
    tar cJf $P/nb.txz -C "${NBDIR:?the cache directory}" numba   # xz: half gzip's size (the 64 MiB a call carries)
    du -h $P/nb.txz
    ;;
run)
    mkdir -p $W; : > $W/log; : > $W/spans.txt
    setsid bash "$0" stages > $W/stages.out 2>&1 < /dev/null &
    echo "started (log: $W/log)"
    ;;
stages)
    source scripts/box_env.sh $P
    chmod +x $P/bin/*
    export LD_LIBRARY_PATH="$PWD/$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    G3="python3 -m g3align.aligner.cli"
    M=$PWD/$P
    T=${THREADS:-$(nproc)}
    DEV=${DEV:-gpu}   # DEV=cpu WG_SIZE=2e7 NPAIRS=20000: a dry run of the script on a machine without a GPU
    # GPU memory every 0.5 s with the time, so that each stage's peak can be read off (peaks, at the end)
    # and the resident memory of g3align's processes (its detached worker is no child the timing waits for)
    (while :; do echo "$(date +%s.%N) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1) $(ps -eo rss=,args= | awk '/g3align/ && !/awk/ {s += $1} END {print int(s / 1024)}')"
        sleep 0.5; done) > $W/gpumem.txt &
    SAMPLER=$!
    note() { echo "$*" >> $W/log; }
    if [ -f $P/nb.txz ]; then   # numba's cache of this tree for the box's Python (G3ALIGN_CPU=portable; pack-cache)
        export G3ALIGN_CPU=portable G3ALIGN_CACHE_DIR=/tmp/g3nb; mkdir -p /tmp/g3nb; tar xJf $P/nb.txz -C /tmp/g3nb
        note "kernel cache in: $(find /tmp/g3nb -name '*.nbi' | wc -l) index files"
        JIT_PID=
    else   # none carried: the kernels compiled here on all cores, beside the stand-in's build (waited for below)
        export G3ALIGN_CACHE_DIR=/tmp/g3nb; mkdir -p /tmp/g3nb
        python3 -c 'import sys, time
from g3align import jit
t = time.time(); jit.precompile(["index", "mem-pe-gpu+wide", "map-gpu", "map-cpu"], log=sys.stderr)
print(f"kernels compiled on the box in {time.time() - t:.1f} s", file=sys.stderr)' 2> $W/jit.err &
        JIT_PID=$!
    fi
    jit_wait() { [ -z "$JIT_PID" ] || { wait $JIT_PID; note "$(tail -2 $W/jit.err | tr '\n' ' ')"; JIT_PID=; }; }
    # timed NAME CMD...: wall time and peak RSS of CMD (stdout to $W/NAME.out, stderr to $W/NAME.err)
    timed() {
        local name=$1; shift
        echo "$name $(date +%s.%N)" >> $W/spans.txt
        python3 -c 'import resource, subprocess, sys, time
t = time.time(); r = subprocess.call(sys.argv[3:], stderr=open(sys.argv[1], "w"), stdout=open(sys.argv[2], "w"))
u = resource.getrusage(resource.RUSAGE_CHILDREN); w = time.time() - t
print(f"{w:.1f} s wall, {u.ru_utime + u.ru_stime:.1f} s CPU ({(u.ru_utime + u.ru_stime) / max(w, 1e-9):.1f} cores), peak RSS {u.ru_maxrss / 1e6:.2f} GB, rc {r}")
sys.exit(r)' "$W/$name.err" "$W/$name.out" "$@" > $W/$name.time; local rc=$?
        echo "$name-end $(date +%s.%N)" >> $W/spans.txt
        [ $rc = 0 ] && note "$name: $(cat $W/$name.time)" \
            || { note "$name: FAILED $(cat $W/$name.time) $(tail -3 $W/$name.err | tr '\n' ' ')"; return 1; }
    }
    # map_vs_mm2 TAG PRESET READS...: minimap2 -ax PRESET and g3align map -ax PRESET (twice with SECOND=1, the two
    # outputs compared) on READS, each building its index from the FASTA in the command; then the records compared.
    # GA=1: g3align also with --gpu-align (tag TAG-ga), against the same minimap2 run; REC=1: the first g3align run
    # records what it compiles (G3ALIGN_JIT_RECORD, rec-TAG.jsonl: what the kernel list lacks)
    map_vs_mm2() {
        local tag=$1 x=$2; shift 2
        jit_wait   # (no compiling beside the peer's timed run)
        timed mm2-$tag minimap2 -ax $x -t $T $W/wg/wg.fa "$@" || true
        grep -h "Real time\|M::mm_idx_gen\|M::mm_idx_stat" $W/mm2-$tag.err | tail -3 >> $W/log || true
        g3_vs_mm2 $tag $tag $x "" "$@"
        [ "${GA:-0}" = 1 ] && g3_vs_mm2 $tag $tag-ga $x --gpu-align "$@"
        return 0
    }
    # g3_vs_mm2 TAG G3TAG PRESET FLAGS READS...: g3align map -ax PRESET FLAGS (twice with SECOND=1), compared with
    # minimap2's mm2-TAG output
    g3_vs_mm2() {
        local tag=$1 g=$2 x=$3 fl=$4; shift 4
        timed g3-map-$g env G3ALIGN_STAGES=1 ${G3TRACE:+G3ALIGN_TRACE=$G3TRACE-$g.trace.json} \
            ${REC:+G3ALIGN_JIT_RECORD=$W/rec-$g.jsonl} $G3 map -ax $x $fl -t $T \
            --device $DEV $W/wg/wg.fa "$@" || true
        grep -h -i "stage\|index" $W/g3-map-$g.err | tail -8 >> $W/log || true
        if [ "${SECOND:-0}" = 1 ]; then
            timed g3-map-$g-2 env G3ALIGN_STAGES=1 $G3 map -ax $x $fl -t $T --device $DEV $W/wg/wg.fa "$@" || true
            grep -h -i "stage\|index" $W/g3-map-$g-2.err | tail -8 >> $W/log || true
            cmp -s $W/g3-map-$g.out $W/g3-map-$g-2.out && note "g3 map $g: second run identical" \
                || note "g3 map $g: second run DIFFERS"
            rm -f $W/g3-map-$g-2.out
        fi
        timed compare-$g $G3 compare $W/mm2-$tag.out $W/g3-map-$g.out || true
        head -20 $W/compare-$g.out >> $W/log || true
        rm -f $W/g3-map-$g.out
    }
    note "device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader), $(nproc) cores"
    # chr20 on the GPU against the CPU's (divsufsort) files: their md5 sums, made by `pack` (CHR20=0: not)
    if [ "${CHR20:-1}" = 1 ]; then
    zcat $P/src/human_GRCh37_chr20.fa.gz > $W/chr20.fa
    jit_wait
    timed chr20-gpu $G3 index --device $DEV --bwa -p $W/c20 $W/chr20.fa || true
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
    fi

    [ "${REUSE:-0}" = 1 ] && [ -f $W/wg/wg.fa ] || timed wg-ref python3 scripts/wg_ref.py --data $P/src --out $W/wg --jobs $T --size ${WG_SIZE:-3.1e9} || true
    [ "${FM:-1}" = 0 ] || { [ "${REUSE:-0}" = 1 ] && [ -f $W/wg/wg.fa.g3i ]; } || { jit_wait; timed wg-index $G3 index --device $DEV --bwa $W/wg/wg.fa || true; }
    grep -h "M::index" $W/wg-index.err >> $W/log || true
    ls -l $W/wg/ >> $W/log
    if [ "${WALK:-20000000}" != 0 ]; then
        jit_wait
        timed wg-walk python3 scripts/fm_walk.py $W/wg/wg.fa ${WALK:-20000000} || true
        cat $W/wg-walk.err >> $W/log || true
    fi

    if [ -n "$NPAIRS" ]; then   # mem at scale: NPAIRS wgsim pairs, g3align mem and bwa mem on the GPU-built files
        timed wgsim wgsim -S 7 -N $NPAIRS -1 150 -2 150 -e 0.01 $W/wg/wg.fa $W/r1.fq $W/r2.fq
        head -4000 $W/r1.fq > $W/s1.fq; head -4000 $W/r2.fq > $W/s2.fq   # 1,000 pairs: start-up and index load
        if [ "${MEM:-1}" = 1 ]; then   # MEM=0: the pairs for SR only
            jit_wait
            timed g3-mem-small $G3 mem -t $T --device $DEV $W/wg/wg.fa $W/s1.fq $W/s2.fq || true
            timed g3-mem env G3ALIGN_STAGES=1 G3ALIGN_TRACE=$W/g3-mem.trace.json $G3 mem -t $T --device $DEV $W/wg/wg.fa $W/r1.fq $W/r2.fq || true
            python3 -c 'import json, sys
ev = json.load(open(sys.argv[1]))
for e in ev:
    if str(e[0]).startswith(("start-up", "end")): print(f"  g3 trace {e[0]}: {e[2]:.2f}-{e[3]:.2f} s")' $W/g3-mem.trace.json >> $W/log 2>&1 || true
            grep -h "M::main\|M::pool" $W/g3-mem.err | tail -4 >> $W/log || true
            timed bwa-mem-small bwa mem -t $T $W/wg/wg.fa $W/s1.fq $W/s2.fq || true
            timed bwa-mem bwa mem -t $T $W/wg/wg.fa $W/r1.fq $W/r2.fq || true
            grep -h "Real time" $W/bwa-mem.err >> $W/log || true
            if [ "${SECOND_MEM:-${SECOND:-0}}" = 1 ]; then
                timed g3-mem-2 $G3 mem -t $T --device $DEV $W/wg/wg.fa $W/r1.fq $W/r2.fq || true
                cmp -s $W/g3-mem.out $W/g3-mem-2.out && note "g3 mem: second run identical" || note "g3 mem: second run DIFFERS"
            fi
            timed compare $G3 compare $W/bwa-mem.out $W/g3-mem.out || true
            head -30 $W/compare.out >> $W/log || true
            rm -f $W/g3-mem-2.out
        fi
        if [ "${SR:-0}" = 1 ]; then   # the same pairs through minimap2 -ax sr and g3align map -ax sr
            G3TRACE=$W/g3-map map_vs_mm2 sr sr $W/r1.fq $W/r2.fq
        fi
        if [ -n "$SR_T" ]; then   # g3align map -ax sr's mapping alone at -t N for N in SR_T, on SR_PAIRS pairs, from
            # the sr minimizer index saved once (g3align index -x sr): how the CPU fragment mode scales with threads
            jit_wait
            timed g3-index-sr $G3 index -x sr --no-fm --device $DEV -p $W/wg/wgsr $W/wg/wg.fa || true
            head -$((4 * ${SR_PAIRS:-200000})) $W/r1.fq > $W/q1.fq; head -$((4 * ${SR_PAIRS:-200000})) $W/r2.fq > $W/q2.fq
            for t in $SR_T; do
                timed g3-sr-t$t env G3ALIGN_DETACH=0 G3ALIGN_STAGES=1 G3ALIGN_TRACE=$W/g3-sr-t$t.trace.json $G3 map -ax sr -t $t \
                    --device $DEV $W/wg/wgsr $W/q1.fq $W/q2.fq || true
                grep -h -i "stage\|mapping" $W/g3-sr-t$t.err | tail -12 >> $W/log || true
                # the records (the @PG line holds the command, -t included)
                [ -f $W/g3-sr-t$t.out ] && cmp -s <(grep -v '^@PG' $W/g3-sr-t$t.out) <(grep -v '^@PG' $W/g3-sr-t${SR_T%% *}.out) \
                    && note "sr -t $t: same output as -t ${SR_T%% *}" || note "sr -t $t: output DIFFERS"
            done
            rm -f $W/g3-sr-t*.out
        fi
    fi
    if [ -n "$MAP" ]; then   # map at scale: pbsim CLR reads at depth $PBDEPTH, minimap2 -ax map-pb and g3align map
        mkdir -p $W/pb
        timed pbsim bash -c "cd $W/pb && pbsim --data-type CLR --model_qc $M/bin/model_qc_clr --depth ${PBDEPTH:-0.02} --seed 3 $W/wg/wg.fa > pbsim.log 2>&1 && cat sd_*.fastq > ../pb.fq && rm -f sd_*"
        note "pbsim: $(awk 'NR % 4 == 2 {n++; b += length($0)} END {print n " reads, " b " bases"}' $W/pb.fq)"
        for x in $MAP; do map_vs_mm2 $x $x $W/pb.fq; done   # map-pb, map-ont, ...
    fi
    if [ -n "$TESTS" ]; then
        jit_wait
        timed tests python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS || true
        tail -3 $W/tests.out >> $W/log || true
    fi
    python3 - $W >> $W/log <<'PY' || true
import sys
w = sys.argv[1]
t, m = [], []
for line in open(f"{w}/gpumem.txt"):
    a = line.split()
    if len(a) == 3 and a[1].isdigit():
        t.append(float(a[0])); m.append((int(a[1]), int(a[2])))
spans = {}
for line in open(f"{w}/spans.txt"):
    name, ts = line.split()
    spans[name] = float(ts)
for name, t0 in spans.items():
    if name.endswith("-end") or name + "-end" not in spans:
        continue
    t1 = spans[name + "-end"]
    inside = [y for x, y in zip(t, m) if t0 <= x <= t1]
    if inside:
        print(f"peaks of {name}: GPU memory {max(g for g, _ in inside)} MiB, g3align processes' RSS "
              f"{max(r for _, r in inside)} MiB")
PY
    note "done"
    kill $SAMPLER 2>/dev/null || true
    ;;
wait)
    end=$((SECONDS + ${2:-500}))
    while [ $SECONDS -lt $end ] && pgrep -f "gpu_index.sh stages" > /dev/null; do sleep 3; done
    mkdir -p "${OUT:-gpu_out}"; cp $W/log "${OUT:-gpu_out}/" 2>/dev/null || true
    # the rest in one file (at most 8 files come back from a call): stderr, times, traces, the GPU memory samples
    (cd $W && tar czf "${OUT:-gpu_out}/results.tgz" stages.out gpumem.txt spans.txt *.err *.time *.trace.json \
        compare*.out rec-*.jsonl 2>/dev/null) || true
    cat $W/log
    ;;
*)
    sed -n '2,12p' "$0"; exit 2
    ;;
esac
