#!/usr/bin/env bash
# CPU side-by-side benchmark: g3align vs bwa 0.7.17 on the same machine, same run.
# usage: scripts/bench_cpu.sh WORKDIR [THREADS]   (WORKDIR gets the references, reads and outputs)
# Needs: bwa, wgsim, samtools on PATH; ../shared/data (or SHARED=...) for the references.
set -euo pipefail
w=$1; t=${2:-2}
shared=${SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
mkdir -p "$w"; cd "$w"
[ -f chr20.fa ] || zcat "$shared/ref/human_GRCh37_chr20.fa.gz" > chr20.fa
[ -f c1.fq ] || wgsim -S 13 -N 100000 -1 150 -2 150 -e 0.002 -r 0.001 -R 0.1 chr20.fa c1.fq c2.fq > /dev/null 2>&1
tm() { /usr/bin/time -f "%e %M" -o "$1.time" "${@:2}"; }
echo "| step | g3align wall s | g3align max RSS MB | bwa wall s | bwa max RSS MB | g3align / bwa |"
echo "|---|---|---|---|---|---|"
row() { read -r a am < "$1.time"; read -r b bm < "$2.time"
  python3 -c "print(f'| $3 | {$a:.1f} | {$am/1024:.0f} | {$b:.1f} | {$bm/1024:.0f} | {$a/$b:.2f} |')"; }
tm g3idx g3align index chr20.fa 2> /dev/null
tm bwaidx bwa index chr20.fa 2> /dev/null
row g3idx bwaidx "index chr20 (63 Mbp)"
# warm the numba cache and the page cache (not timed)
head -4000 c1.fq > warm1.fq; head -4000 c2.fq > warm2.fq
g3align mem chr20.fa warm1.fq > /dev/null 2>&1; g3align mem chr20.fa warm1.fq warm2.fq > /dev/null 2>&1
cat chr20.fa.g3i chr20.fa.bwt chr20.fa.sa chr20.fa.pac > /dev/null
tm g3se g3align mem -t "$t" chr20.fa c1.fq > g3se.sam 2> /dev/null
tm bwase bwa mem -t "$t" chr20.fa c1.fq > bwase.sam 2> /dev/null
row g3se bwase "mem -t $t, 100k single-end 150 bp"
tm g3pe g3align mem -t "$t" chr20.fa c1.fq c2.fq > g3pe.sam 2> /dev/null
tm bwape bwa mem -t "$t" chr20.fa c1.fq c2.fq > bwape.sam 2> /dev/null
row g3pe bwape "mem -t $t, 100k pairs 2x150 bp"
echo
g3align compare g3se.sam bwase.sam | grep "identical in every"
g3align compare g3pe.sam bwape.sam | grep "identical in every"
