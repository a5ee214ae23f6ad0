#!/usr/bin/env bash
# Every command's output on a fixed set of inputs, to compare two versions of g3align (or the GPU with the CPU) byte
# for byte: a change that should not alter behaviour must leave every file the same.
#
#   bash scripts/same_outputs.sh inputs IN          # IN: the inputs, from ../shared/data (E. coli, HIV, real long reads)
#   bash scripts/same_outputs.sh run IN OUT [DEV]   # the commands on IN with --device DEV (cpu), outputs into OUT
#   bash scripts/same_outputs.sh diff OUT1 OUT2     # every output of two runs compared (SAM/PAF/TSV, indexes, errors)
#
# The commands: index (FM and bwa's files), mem PE / SE / -a -M, map -ax map-pb / -cx map-ont --cs / -ax sr,
# align local / global, and two bad inputs (their one-line errors and exit codes).
set -eu
cmd=$1; shift
case $cmd in
inputs)
    D=$1; S=${SHARED:-../shared/data}; mkdir -p "$D"
    (zcat "$S/sim/ecoli_MG1655_wgsim_2x150_R1.fq.gz" | head -80000 > "$D/e1.fq") || true
    (zcat "$S/sim/ecoli_MG1655_wgsim_2x150_R2.fq.gz" | head -80000 > "$D/e2.fq") || true
    (zcat "$S/reads/hiv1_miseq_iva_R1.fastq.gz" | head -40000 > "$D/hiv1.fq") || true
    (zcat "$S/reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz" | head -1200 > "$D/pb.fq") || true
    (zcat "$S/reads/ecoli_K12_ont_R9_nanoget.fastq.gz" | head -120 > "$D/ont.fq") || true
    zcat "$S/ref/ecoli_K12_MG1655.fa.gz" > "$D/ecoli.fa"
    zcat "$S/ref/hiv1_iva_reference.fa.gz" > "$D/hiv.fa"
    python3 - "$D" <<'PY'
import random, sys
random.seed(5)
with open(f"{sys.argv[1]}/q.fa", "w") as q, open(f"{sys.argv[1]}/t.fa", "w") as t:
    for i in range(3000):
        n = random.randint(0, 400)
        s = "".join(random.choice("ACGTN" if i % 7 == 0 else "ACGT") for _ in range(n))
        u = "".join(c if random.random() > 0.08 else random.choice("ACGT") for c in s)
        q.write(f">q{i}\n{s}\n")
        t.write(f">t{i}\n{u}\n")
PY
    ;;
run)
    D=$1; O=$2; DEV=${3:-cpu}; mkdir -p "$O"; T=${THREADS:-2}
    g() { python3 -m g3align.aligner.cli "$@"; }
    t0=$(date +%s)
    g index -p "$O/ecoli" "$D/ecoli.fa" 2> "$O/index.err"
    g index --bwa -p "$O/hiv" "$D/hiv.fa" 2> "$O/index2.err"
    g mem -t "$T" --device "$DEV" "$O/ecoli" "$D/e1.fq" "$D/e2.fq" > "$O/pe.sam" 2> "$O/pe.err"
    g mem -t "$T" --device "$DEV" "$O/hiv" "$D/hiv1.fq" > "$O/se.sam" 2> "$O/se.err"
    g mem -t "$T" --device "$DEV" -a -M "$O/ecoli" "$D/e1.fq" > "$O/se_aM.sam" 2> /dev/null
    g map -t "$T" --device "$DEV" -ax map-pb "$D/ecoli.fa" "$D/pb.fq" > "$O/pb.sam" 2> "$O/pb.err"
    g map -t "$T" --device "$DEV" -cx map-ont --cs "$D/ecoli.fa" "$D/ont.fq" > "$O/ont.paf" 2> "$O/ont.err"
    g map -t "$T" --device "$DEV" -ax sr "$D/ecoli.fa" "$D/e1.fq" "$D/e2.fq" > "$O/sr.sam" 2> "$O/sr.err"
    g align --device "$DEV" --mode local "$D/q.fa" "$D/t.fa" > "$O/al_local.tsv" 2> /dev/null
    g align --device "$DEV" --mode global --traceback "$D/q.fa" "$D/t.fa" > "$O/al_global.tsv" 2> /dev/null
    g mem -t "$T" "$O/ecoli" /nonexistent.fq > /dev/null 2> "$O/bad1.err" || echo "rc=$?" >> "$O/bad1.err"
    printf '@r1\nACGT\n+\nII\n' > "$O/badq.fq"
    g mem "$O/ecoli" "$O/badq.fq" > /dev/null 2> "$O/bad2.err" || echo "rc=$?" >> "$O/bad2.err"
    echo "$(( $(date +%s) - t0 )) s" > "$O/time.txt"
    ;;
diff)
    A=$1; B=$2; bad=0
    for f in pe.sam se.sam se_aM.sam pb.sam sr.sam ont.paf al_local.tsv al_global.tsv; do
        # SAM headers name the output paths (@PG): records only
        if cmp -s <(grep -v '^@' "$A/$f") <(grep -v '^@' "$B/$f"); then s=same; else s=DIFFERENT; bad=1; fi
        echo "$f: $(grep -vc '^@' "$A/$f") lines, $s"
    done
    for f in ecoli.g3i hiv.g3i hiv.amb hiv.ann hiv.bwt hiv.pac hiv.sa; do
        if cmp -s "$A/$f" "$B/$f"; then s=same; else s=DIFFERENT; bad=1; fi
        echo "$f: $s"
    done
    for f in bad1.err bad2.err; do
        if cmp -s <(grep -v '^\[M::' "$A/$f" | sed "s#$A#OUT#g") <(grep -v '^\[M::' "$B/$f" | sed "s#$B#OUT#g"); then
            s=same; else s=DIFFERENT; bad=1; fi
        echo "$f: $s ($(grep -v '^\[M::' "$B/$f" | tr '\n' ' '))"
    done
    exit $bad
    ;;
*) echo "usage: same_outputs.sh inputs IN | run IN OUT [DEVICE] | diff OUT1 OUT2" >&2; exit 2 ;;
esac
