#!/bin/bash
# The benchmark suite (scripts/bench_suite.py) on the GPU box (two runs there) and the pack of what it needs.
#   bash scripts/gpu_bench.sh pack      here: .devdata/bench (references and real reads from ../shared/data, the
#                                       first PACBIO real PacBio reads, Debian's bwa, minimap2, dwgsim, wgsim and
#                                       pbsim with wgsim's libraries and pbsim's CLR model, the click/tqdm/
#                                       pydivsufsort wheels): ~55 MB, under the 64 MiB a call carries
#   bash scripts/gpu_bench.sh mem       on the box (carry .devdata/bench): prepare everything, run the mem workloads
#   bash scripts/gpu_bench.sh map       on the box, the same machine still warm: the map workloads
# Results: /tmp/g3bench/results.{jsonl,md}, copied to $OUT. SIZE=cpu for the small sizes; ONLY=name,... for some.
set -eo pipefail
P=${BENCH_DIR:-.devdata/bench}
case "${1:-}" in
pack)
    D=${SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
    rm -rf $P; mkdir -p $P/bin $P/lib $P/whl
    cp $D/ref/{human_GRCh37_chr20,ecoli_K12_MG1655,hiv1_iva_reference,honeybee_viruses_DWV_VDV1}.fa.gz $P/
    cp $D/reads/{hiv1_miseq_iva_R1,hiv1_miseq_iva_R2,honeybee_virus_illumina_SRR059298,ecoli_K12_ont_R9_nanoget}.fastq.gz $P/
    (zcat $D/reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz || true) | head -n $((4 * ${PACBIO:-1500})) | gzip -9 \
        > $P/ecoli_K12_pacbio_RSII_first3000.fastq.gz   # (the name the suite looks for; only the first reads)
    for b in bwa minimap2 dwgsim wgsim pbsim; do cp "$(command -v $b)" $P/bin/; done
    for l in libhts.so.3 libdeflate.so.0 libhtscodecs.so.2; do cp -L /lib/x86_64-linux-gnu/$l $P/lib/; done
    cp /usr/share/pbsim/models/model_qc_clr $P/
    cp .whl/click-*.whl .whl/tqdm-*.whl .whl/pydivsufsort-*.whl $P/whl/
    du -sh $P
    ;;
mem|map|all)
    OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; W=/tmp/g3bench
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $P/whl/*.whl >/dev/null 2>&1 || true
    mkdir -p /tmp/pkg/g3align
    for f in g3align/*; do ln -sfn "$PWD/$f" /tmp/pkg/g3align/; done
    for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
    chmod +x $P/bin/*
    export PATH="$PWD/$P/bin:$PATH" LD_LIBRARY_PATH="$PWD/$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1
    dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    sel=$(python3 scripts/bench_suite.py --work $W --list | awk -v m="$1" \
        'm == "all" || (m == "mem" && $2 ~ /^mem/) || (m == "map" && $2 !~ /^mem/) {print $1}' | paste -sd,)
    python3 scripts/bench_suite.py --data $P --work $W --size "${SIZE:-gpu}" --only "${ONLY:-$sel}" \
        --pbsim-model $PWD/$P/model_qc_clr --device-name "${dev:-no GPU}, $(nproc) cores" \
        --g3 "env G3ALIGN_DETACH=0 ${PY:-python3} -m g3align.aligner.cli"
    cp $W/results.jsonl $W/results.md "$OUT"/ 2>/dev/null || true
    ;;
*)
    echo "usage: bash scripts/gpu_bench.sh pack|mem|map|all" >&2; exit 2 ;;
esac
