#!/usr/bin/env bash
# CPU side-by-side benchmark of the long-read path: g3align map vs minimap2 2.24, same machine, same run.
# usage: scripts/bench_map_cpu.sh WORKDIR [THREADS]
# Data: ../shared/data (or SHARED=...): real ONT R9 and PacBio RSII E. coli reads, plus pbsim CLR reads
# simulated from E. coli MG1655 (pbsim 1.0.3, --seed 7 --depth 2, CLR model) into WORKDIR.
# Prints a table (wall time, max RSS, bases/s ratio) and the per-read concordance of the SAM outputs.
set -euo pipefail
w=$1; t=${2:-2}
shared=${SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
mkdir -p "$w"; cd "$w"
ecoli=$shared/ref/ecoli_K12_MG1655.fa.gz
pbref=$shared/ref/ecoli_K12_PBcR_reference.fa.gz
ont=$shared/reads/ecoli_K12_ont_R9_nanoget.fastq.gz
pb=$shared/reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz
[ -f ecoli.fa ] || zcat "$ecoli" > ecoli.fa
if [ ! -f pbsim.fq ]; then
    pbsim --prefix pbsim --seed 7 --data-type CLR --depth 2 --model_qc /usr/share/pbsim/models/model_qc_clr \
        ecoli.fa > /dev/null 2>&1
    mv pbsim_0001.fastq pbsim.fq
fi
tm() { /usr/bin/time -f "%e %M" -o "$1.time" "${@:2}"; }
# warm numba's cache (not timed)
head -40 pbsim.fq > warm.fq; g3align map -ax map-pb ecoli.fa warm.fq > /dev/null 2>&1
echo "| set (preset) | bases | g3align wall s | g3align RSS MB | minimap2 wall s | minimap2 RSS MB | g3align / minimap2 time |"
echo "|---|---|---|---|---|---|---|"
for set in ont pb pbsim; do
    case $set in
        ont) ref=$ecoli; rd=$ont; x=map-ont ;;
        pb) ref=$pbref; rd=$pb; x=map-pb ;;
        pbsim) ref=ecoli.fa; rd=pbsim.fq; x=map-pb ;;
    esac
    tm "g3_$set" g3align map -t "$t" -ax "$x" "$ref" "$rd" > "g3_$set.sam" 2> /dev/null
    tm "mm_$set" minimap2 -t "$t" -ax "$x" "$ref" "$rd" > "mm_$set.sam" 2> /dev/null
    bases=$( (zcat -f "$rd") | awk 'NR%4==2{s+=length($0)} END{print s}')
    read -r a am < "g3_$set.time"; read -r b bm < "mm_$set.time"
    python3 -c "print(f'| $set ($x) | {$bases:,} | {$a:.1f} | {$am/1024:.0f} | {$b:.1f} | {$bm/1024:.0f} | {$a/$b:.2f} |')"
done
echo
for set in ont pb pbsim; do
    echo "== $set"
    g3align compare "g3_$set.sam" "mm_$set.sam" --tags NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA \
        | grep -E "identical in every|^RNAME\+POS|^CIGAR|^MAPQ|records"
done
