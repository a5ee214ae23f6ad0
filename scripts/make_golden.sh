#!/usr/bin/env bash
# Regenerate the golden bwa mem outputs in data/golden/ (the `make golden` target).
#
#   scripts/make_golden.sh            # golden SAMs from the reads already in data/
#   scripts/make_golden.sh --reads    # first re-simulate data/lambda_R{1,2}.fq.gz with wgsim
#
# Needs bwa 0.7.17 (Debian: bwa 0.7.17-r1188) and, with --reads, wgsim 1.16 (Debian: samtools).
# Outputs are byte-reproducible: fixed seed, `bwa mem -t1`, `gzip -n` (no name/time stamp), and the
# @PG line removed from the header (it holds the temporary paths of the command line).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
data="$here/data"
ref="$data/lambda.fa.gz"
r1="$data/lambda_R1.fq.gz"
r2="$data/lambda_R2.fq.gz"

for tool in bwa gzip; do
    command -v "$tool" >/dev/null || { echo "make_golden.sh: $tool not found" >&2; exit 1; }
done
ver="$( (bwa 2>&1 || true) | sed -n 's/^Version: //p')"
[[ "$ver" == 0.7.17* ]] || echo "make_golden.sh: warning: bwa is '$ver', not 0.7.17" >&2

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [[ "${1:-}" == "--reads" ]]; then
    command -v wgsim >/dev/null || { echo "make_golden.sh: wgsim not found" >&2; exit 1; }
    zcat "$ref" > "$tmp/lambda.fa"
    # 2,000 pairs of 2x150 bp, fixed seed 11; base error 0.5%, mutation rate 0.1%, 10% of them indels
    wgsim -S 11 -N 2000 -1 150 -2 150 -e 0.005 -r 0.001 -R 0.1 \
        "$tmp/lambda.fa" "$tmp/R1.fq" "$tmp/R2.fq" > "$data/lambda_wgsim_mutations.txt" 2>/dev/null
    gzip -n -9 -c "$tmp/R1.fq" > "$r1"
    gzip -n -9 -c "$tmp/R2.fq" > "$r2"
fi

zcat "$ref" > "$tmp/ref.fa"
bwa index "$tmp/ref.fa" 2>/dev/null
mkdir -p "$data/golden"
# single-end: R1 alone; paired-end: R1 + R2
bwa mem -t1 "$tmp/ref.fa" "$r1" 2>/dev/null | grep -v '^@PG' | gzip -n -9 > "$data/golden/lambda_se.bwa.sam.gz"
bwa mem -t1 "$tmp/ref.fa" "$r1" "$r2" 2>/dev/null | grep -v '^@PG' | gzip -n -9 > "$data/golden/lambda_pe.bwa.sam.gz"
echo "make_golden.sh: wrote $data/golden/lambda_se.bwa.sam.gz and lambda_pe.bwa.sam.gz" >&2

# Long reads (g3align map): 52 PacBio CLR reads simulated by pbsim 1.0.3 from lambda, and minimap2 2.24's
# PAF (-x map-pb), PAF with CIGAR (-c) and SAM (-a) on them.
lr="$data/lambda_pbsim.fq.gz"
if [[ "${1:-}" == "--reads" ]]; then
    command -v pbsim >/dev/null || { echo "make_golden.sh: pbsim not found" >&2; exit 1; }
    (cd "$tmp" && pbsim --prefix lamd --seed 11 --data-type CLR --depth 4 --length-mean 4000 \
        --model_qc /usr/share/pbsim/models/model_qc_clr ref.fa >/dev/null 2>&1)
    gzip -n -9 -c "$tmp/lamd_0001.fastq" > "$lr"
fi
if command -v minimap2 >/dev/null; then
    minimap2 -t1 -x map-pb "$tmp/ref.fa" "$lr" 2>/dev/null | gzip -n -9 > "$data/golden/lambda_pbsim.mm2.paf.gz"
    minimap2 -t1 -cx map-pb "$tmp/ref.fa" "$lr" 2>/dev/null | gzip -n -9 > "$data/golden/lambda_pbsim.mm2c.paf.gz"
    minimap2 -t1 -ax map-pb "$tmp/ref.fa" "$lr" 2>/dev/null | grep -v '^@PG' | gzip -n -9 \
        > "$data/golden/lambda_pbsim.mm2.sam.gz"
    echo "make_golden.sh: wrote $data/golden/lambda_pbsim.mm2{,c}.paf.gz and lambda_pbsim.mm2.sam.gz" >&2
else
    echo "make_golden.sh: minimap2 not found; long-read golden files not written" >&2
fi
