#!/usr/bin/env bash
# bwa's ALT handling and minimap2's --qstrand on the GPU box, in phases (ONLY, default all of them):
#   manifest  the GPU jobs of g3align/jit_manifest.json regenerated (OUT/jit_manifest.json), and the CPU mem kernels
#             compiled into the same cache for the phases after it
#   tests     tests/test_alt.py and tests/test_memchain.py with a GPU
#   scale     an ALT-heavy reference made from 10 Mbp of chr20 (tests/test_alt.py's generator: 2 primary contigs, a
#             decoy, 5 ALT contigs of 0-4 % divergence, 6.8 Mbp of ALT) with PAIRS simulated pairs: `bwa mem`,
#             g3align on the GPU and on the CPU (twice each: the first run of a fresh box compiles), on bwa's index
#             files and PREFIX.alt; records compared, wall times
#   qstrand   `map --qstrand` on the GPU against minimap2 2.24 (PAF, cs, MD) on lambda pbsim and E. coli ONT reads
#
#   bash scripts/gpu_parity.sh pack    # here: .devdata/alt (bwa, minimap2, chr20 piece, E. coli, wheels)
#   bash scripts/gpu_parity.sh run     # on the box, carrying .devdata/alt; results in OUT (gpu_out)
set -eo pipefail
B=${ALT_DIR:-.devdata/alt}
if [ "$1" = pack ]; then
    mkdir -p "$B/bin" "$B/whl"
    cp "$(command -v bwa)" "$(command -v minimap2)" "$B/bin/"
    cp ../shared/data/ref/ecoli_K12_MG1655.fa.gz ../shared/data/reads/ecoli_K12_ont_R9_nanoget.fastq.gz "$B/"
    python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --platform manylinux2014_x86_64 -d "$B/whl" pydivsufsort pytest pluggy iniconfig packaging pygments
    python3 - "$B" <<'EOF'
import gzip, sys
seq = gzip.open("../shared/data/ref/human_GRCh37_chr20.fa.gz", "rb").read().split(b"\n", 1)[1].replace(b"\n", b"")
with gzip.open(f"{sys.argv[1]}/chr20_5M_15M.fa.gz", "wb") as f:
    f.write(b">chr20_5M_15M\n" + b"\n".join(seq[i:i + 70] for i in range(5_000_000, 15_000_000, 70)) + b"\n")
EOF
    du -sh "$B"
    exit 0
fi
OUT=${OUT:-gpu_out}; W=${WORK:-/tmp/g3alt}; PAIRS=${PAIRS:-100000}; T=${THREADS:-$(nproc)}
ONLY=${ONLY:-manifest tests scale qstrand}
on() { [[ " $ONLY " == *" $1 "* ]]; }
mkdir -p "$OUT" "$W"
say() { echo "[parity] $(date +%T) $*" | tee -a "$OUT/parity.log"; }
. scripts/box_env.sh "$B"
if on manifest; then
    t=$(date +%s)
    cp g3align/jit_manifest.json "$OUT/jit_manifest.json"
    python3 scripts/jit_manifest.py --device gpu -t "$T" -o "$OUT/jit_manifest.json" 2> "$OUT/manifest.log"
    say "GPU manifest in $(( $(date +%s) - t )) s"
    ln -sfn "$(ls -d /tmp/g3align-manifest-*/cache | head -1)" /tmp/g3cache
    G3ALIGN_CACHE_DIR=/tmp/g3cache python3 -c "from g3align import jit; jit.precompile(['mem-pe-cpu', 'mem-se-cpu'])"
    say "CPU mem kernels in $(( $(date +%s) - t )) s"
fi
[ -d /tmp/g3cache ] && export G3ALIGN_CACHE_DIR=/tmp/g3cache
if on tests; then
    t=$(date +%s)
    python3 -m pytest -q -p no:cacheprovider tests/test_alt.py tests/test_memchain.py > "$OUT/pytest.log" 2>&1 || true
    say "tests in $(( $(date +%s) - t )) s: $(tail -1 "$OUT/pytest.log")"
fi
if on qstrand; then
    for a in "-x map-ont" "-cx map-ont --cs" "-cx map-ont --cs=long" "-cx map-ont --MD --eqx"; do
        for d in "data/lambda.fa.gz data/lambda_pbsim.fq.gz" "$B/ecoli_K12_MG1655.fa.gz $B/ecoli_K12_ont_R9_nanoget.fastq.gz"; do
            # shellcheck disable=SC2086
            minimap2 -t "$T" $a --qstrand $d > "$W/q.mm2.paf" 2> /dev/null
            # shellcheck disable=SC2086
            python3 -m g3align.aligner.cli map -t "$T" --device gpu $a --qstrand $d > "$W/q.gpu.paf" 2> "$OUT/q.err"
            if cmp -s "$W/q.mm2.paf" "$W/q.gpu.paf"; then same=identical; else same=DIFFERENT; fi
            say "qstrand $a on ${d##*/}: $(wc -l < "$W/q.mm2.paf") lines, GPU vs minimap2 $same"
        done
    done
fi
on scale || exit 0
if [ ! -f "$W/r2.fq" ]; then
    python3 - "$W" "$B/chr20_5M_15M.fa.gz" "$PAIRS" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from test_alt import fasta_codes, make_alt_reference, simulate_pairs
d = Path(sys.argv[1])
fa, ctg = make_alt_reference(d, codes=fasta_codes(sys.argv[2]))
q1, q2 = simulate_pairs(ctg, int(sys.argv[3]))
(d / "r1.fq").write_bytes(q1)
(d / "r2.fq").write_bytes(q2)
EOF
    bwa index "$W/altref.fa" 2> /dev/null
fi
say "inputs: $(( $(wc -l < "$W/r1.fq") / 4 )) pairs, $(grep -c '>' "$W/altref.fa") contigs"
G3="python3 -m g3align.aligner.cli mem -t $T"
run() {  # name, command...: wall time to alt.log, output to W/name.sam
    local name=$1; shift
    local t0; t0=$(date +%s.%N)
    "$@" > "$W/$name.sam" 2> "$OUT/$name.err"
    say "$name $(python3 -c "import time; print(f'{time.time() - $t0:.2f}')") s"
}
for mode in pe se; do
    reads=("$W/r1.fq"); [ $mode = pe ] && reads+=("$W/r2.fq")
    run "bwa-$mode" bwa mem -t "$T" "$W/altref.fa" "${reads[@]}"
    run "gpu-$mode-1" $G3 --device gpu "$W/altref.fa" "${reads[@]}"
    run "gpu-$mode" $G3 --device gpu "$W/altref.fa" "${reads[@]}"
    run "cpu-$mode-1" $G3 --device cpu "$W/altref.fa" "${reads[@]}"
    run "cpu-$mode" $G3 --device cpu "$W/altref.fa" "${reads[@]}"
    run "bwa-$mode-2" bwa mem -t "$T" "$W/altref.fa" "${reads[@]}"
    for x in gpu cpu; do
        if cmp -s <(grep -v '^@' "$W/bwa-$mode.sam") <(grep -v '^@' "$W/$x-$mode.sam"); then same=identical
        else same="DIFFERENT ($(diff <(grep -v '^@' "$W/bwa-$mode.sam") <(grep -v '^@' "$W/$x-$mode.sam") | grep -c '^<') lines)"; fi
        say "$mode $x vs bwa: $same; $(grep -v '^@' "$W/$x-$mode.sam" | wc -l) records, $(grep -c 'pa:f:' "$W/$x-$mode.sam") with pa"
    done
done
