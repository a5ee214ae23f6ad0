#!/usr/bin/env bash
# Variant-calling drop-in check: run the same samtools/bcftools pipeline on two paired-end SAMs
# (ours and bwa's) and report how many variant sites agree.
# usage: scripts/variant_concordance.sh REF.fa TEST.sam GOLD.sam OUTDIR
set -euo pipefail
ref=$1; test=$2; gold=$3; out=$4
mkdir -p "$out"
[ -f "$ref.fai" ] || samtools faidx "$ref"
for tag in test gold; do
  sam=$([ $tag = test ] && echo "$test" || echo "$gold")
  samtools sort -n -@2 -o "$out/$tag.name.bam" "$sam"
  samtools fixmate -m "$out/$tag.name.bam" "$out/$tag.fixmate.bam"
  samtools sort -@2 -o "$out/$tag.bam" "$out/$tag.fixmate.bam"
  samtools index "$out/$tag.bam"
  bcftools mpileup -Ou -f "$ref" "$out/$tag.bam" 2>/dev/null | bcftools call -mv -Oz -o "$out/$tag.vcf.gz" 2>/dev/null
  bcftools query -f '%CHROM\t%POS\t%REF\t%ALT[\t%GT]\n' "$out/$tag.vcf.gz" > "$out/$tag.sites"
done
python3 - "$out/test.sites" "$out/gold.sites" <<'PY'
import sys
a = set(open(sys.argv[1]).read().split("\n")) - {""}
b = set(open(sys.argv[2]).read().split("\n")) - {""}
both = len(a & b); union = len(a | b)
print(f"variant sites: test {len(a)}, gold {len(b)}, shared {both}, only test {len(a - b)}, "
      f"only gold {len(b - a)}, agreement {100.0 * both / max(union, 1):.3f}% of {union}")
PY
