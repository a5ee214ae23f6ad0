#!/bin/sh
# Rebuild the test vectors tests/data/mmhit_*.bin.gz (run by hand; needs minimap2 v2.24 sources and gcc).
#   sh tests/data/mmhit_harness.sh /path/to/minimap2-2.24-sources /tmp/mmh
# The sources are copied to a scratch directory and patched there: each dumped function of hit.c, esterr.c,
# pe.c and lchain.c is renamed *_orig, mmhit_harness.c provides wrappers that write the call's input and
# output (binary records, see read_records in tests/test_lchain.py) to $MMH_DUMP, and mm_map_frag announces
# each read. Then, with MMH_DUMP set, run e.g.
#   minimap2 -t1 -c -x map-ont ecoli_K12_MG1655.fa.gz reads.fq      (check: PAF equal to stock minimap2)
#   ./rnd 200                                                           (random region sets, mmhit_rnd.c)
#   ./rndchain 400                                                      (random anchors, mmhit_rndchain.c)
# and keep a subset of reads per preset (gzip) so that all vectors stay under 2 MB.
set -e
src=$1; dst=$2; here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dst"; cp -r "$src" "$dst"; cd "$dst"
for f in mm_split_reg mm_set_parent mm_hit_sort mm_set_sam_pri mm_sync_regs mm_select_sub mm_filter_strand_retained \
         mm_filter_regs mm_squeeze_a mm_set_mapq; do
  sed -i "s/^\(void\|int\) $f(/\1 ${f}_orig(/" hit.c
done
sed -i 's/^mm_reg1_t \*mm_gen_regs(/mm_reg1_t *mm_gen_regs_orig(/' hit.c
sed -i 's/^void mm_est_err(/void mm_est_err_orig(/' esterr.c
sed -i 's/^void mm_select_sub_multi(/void mm_select_sub_multi_orig(/' pe.c
sed -i 's/^mm128_t \*mg_lchain_dp(/mm128_t *mg_lchain_dp_orig(/; s/^mm128_t \*mg_lchain_rmq(/mm128_t *mg_lchain_rmq_orig(/' lchain.c
sed -i 's/\tif (opt->max_qlen > 0 \&\& qlen_sum > opt->max_qlen) return;/&\n\t{ void mmh_read_start(const char*, int); mmh_read_start(qname? qname : "", qlen_sum); }/' map.c
cp "$here/mmhit_harness.c" mmh_wrap.c
cp "$here/mmhit_rnd.c" rnd.c
cp "$here/mmhit_rndchain.c" rndchain.c
sed -i 's/^OBJS=\t*/&mmh_wrap.o /' Makefile
make -j2
gcc -g -O2 -fsigned-char -I. rnd.c $(ls *.o | grep -v main.o) -o rnd -lz -lm -lpthread
gcc -g -O2 -fsigned-char -I. rndchain.c $(ls *.o | grep -v main.o) -o rndchain -lz -lm -lpthread
