#!/usr/bin/env python3
"""The benchmark suite (`make bench`): g3align against bwa mem 0.7.17 and minimap2 2.24 on many workloads, each
run side by side on the same machine in the same run, with the outputs compared byte for byte.

Workloads cover references (human chr20, E. coli, HIV-1, honeybee viruses), read lengths (72-250 bp, long reads),
simulators (dwgsim and wgsim at different error, mutation and indel rates, pbsim CLR) and real reads (HIV MiSeq
2x250, honeybee GAIIx 72 bp, PacBio RS II, ONT R9). `--size gpu` is sized for the GPU box (1M pairs of short reads,
chr20 at 1x of long reads), `--size cpu` for the 2-core machine.

    python scripts/bench_suite.py --data DIR --work DIR [--size gpu|cpu] [--threads N] [--phase prep|run|all]
                                  [--only NAME,...] [--g3 "COMMAND"]

DIR (--data) holds the shared FASTA and FASTQ files under the names in REFS and REAL (../shared/data's ref/, reads/;
or one flat folder). Peers and simulators come from PATH (or --bin DIR). `--phase prep` decompresses the references,
simulates the reads and builds the indexes (bwa's in the background); `--phase run` runs the workloads (an untimed
g3align warm-up per command first, which compiles on a fresh machine) and appends one JSON line per workload to
WORK/results.jsonl; every phase ends by printing the table of all results so far (WORK/results.md) with the minimum
ratio per mode. A phase can be split over several calls (`--only`), the work folder kept between them.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REFS = {  # name: file under --data (ref/ or flat)
    "chr20": "human_GRCh37_chr20.fa.gz",
    "ecoli": "ecoli_K12_MG1655.fa.gz",
    "hiv": "hiv1_iva_reference.fa.gz",
    "bee": "honeybee_viruses_DWV_VDV1.fa.gz",
}
REAL = {  # real reads: name -> files under --data (reads/ or flat)
    "hiv": ["hiv1_miseq_iva_R1.fastq.gz", "hiv1_miseq_iva_R2.fastq.gz"],
    "bee": ["honeybee_virus_illumina_SRR059298.fastq.gz"],
    "pacbio": ["ecoli_K12_pacbio_RSII_first3000.fastq.gz"],
    "ont": ["ecoli_K12_ont_R9_nanoget.fastq.gz"],
}
# simulated read sets: name -> (reference, simulator, arguments, pairs/reads at --size gpu, at --size cpu)
SIMS = {
    "dw150": ("chr20", "dwgsim", "-z 13 -1 150 -2 150 -e 0.002 -E 0.002 -r 0.001 -y 0", 1_000_000, 50_000),
    "wg100": ("chr20", "wgsim", "-S 7 -1 100 -2 100 -e 0.01 -r 0.002 -R 0.3", 1_000_000, 50_000),
    "dw250": ("ecoli", "dwgsim", "-z 5 -1 250 -2 250 -e 0.005 -E 0.01 -r 0.003 -R 0.3 -y 0", 500_000, 30_000),
    "wg150": ("ecoli", "wgsim", "-S 11 -1 150 -2 150 -e 0.002 -r 0.001 -R 0.1", 1_000_000, 100_000),
    "pbchr": ("chr20", "pbsim", "--depth {depth} --seed 3", 1.0, 0.05),          # depth, not reads
    "pbecoli": ("ecoli", "pbsim", "--depth {depth} --seed 5", 5.0, 1.0),
}
# workloads: name -> (mode, reference, read files, peer command, g3align arguments)
#   {ref}: the reference FASTA (bwa's index prefix), {r1}/{r2}: read files, {t}: threads
WORKLOADS = {
    "mem-pe-chr20-dwgsim-2x150": ("mem-pe", "chr20", ["dw150_1", "dw150_2"], "bwa mem -t {t} {ref} {r1} {r2}",
                                  "mem -t {t} {ref} {r1} {r2}"),
    "mem-pe-chr20-wgsim-2x100-err1%": ("mem-pe", "chr20", ["wg100_1", "wg100_2"], "bwa mem -t {t} {ref} {r1} {r2}",
                                       "mem -t {t} {ref} {r1} {r2}"),
    "mem-pe-ecoli-dwgsim-2x250": ("mem-pe", "ecoli", ["dw250_1", "dw250_2"], "bwa mem -t {t} {ref} {r1} {r2}",
                                  "mem -t {t} {ref} {r1} {r2}"),
    "mem-pe-hiv-miseq-2x250-real": ("mem-pe", "hiv", ["hiv_1", "hiv_2"], "bwa mem -t {t} {ref} {r1} {r2}",
                                    "mem -t {t} {ref} {r1} {r2}"),
    "mem-se-chr20-dwgsim-150": ("mem-se", "chr20", ["dw150_1"], "bwa mem -t {t} {ref} {r1}", "mem -t {t} {ref} {r1}"),
    "mem-se-ecoli-wgsim-150": ("mem-se", "ecoli", ["wg150_1"], "bwa mem -t {t} {ref} {r1}", "mem -t {t} {ref} {r1}"),
    "mem-se-bee-gaiix-72-real": ("mem-se", "bee", ["bee_1"], "bwa mem -t {t} {ref} {r1}", "mem -t {t} {ref} {r1}"),
    "sr-pe-chr20-dwgsim-2x150": ("sr", "chr20", ["dw150_1", "dw150_2"], "minimap2 -ax sr -t {t} {ref} {r1} {r2}",
                                 "map -ax sr -t {t} {ref} {r1} {r2}"),
    "map-pb-chr20-pbsim": ("map-low-depth", "chr20", ["pbchr_1"], "minimap2 -ax map-pb -t {t} {ref} {r1}",
                              "map -ax map-pb -t {t} {ref} {r1}"),
    "map-pb-ecoli-pbsim": ("map-high-depth", "ecoli", ["pbecoli_1"], "minimap2 -ax map-pb -t {t} {ref} {r1}",
                              "map -ax map-pb -t {t} {ref} {r1}"),
    "map-pb-ecoli-rsii-real": ("map-high-depth", "ecoli", ["pacbio_1"], "minimap2 -ax map-pb -t {t} {ref} {r1}",
                               "map -ax map-pb -t {t} {ref} {r1}"),
    "map-ont-ecoli-r9-real": ("map-high-depth", "ecoli", ["ont_1"], "minimap2 -ax map-ont -t {t} {ref} {r1}",
                              "map -ax map-ont -t {t} {ref} {r1}"),
}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def find(data: Path, name: str) -> Path:
    for p in (data / name, data / "ref" / name, data / "reads" / name):
        if p.exists():
            return p
    sys.exit(f"[bench] {name} not found under {data}")


def run_timed(cmd: str, out: Path, err: Path, env=None) -> tuple[float, float, int]:
    """(wall seconds, max RSS MiB, exit status) of one command, its stdout to `out`."""
    with open(out, "wb") as fo, open(err, "wb") as fe:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, shell=True, stdout=fo, stderr=fe, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        return time.perf_counter() - t, ru.ru_maxrss / 1024, p.returncode


def body_lines(path: Path):
    with open(path, "rb") as f:
        for line in f:
            if not line.startswith(b"@"):
                yield line


def compare(a: Path, b: Path) -> tuple[int, int, int]:
    """(records in a, records in b, records that differ) of two SAM files, headers left out."""
    na = nb = nd = 0
    ia, ib = body_lines(a), body_lines(b)
    while True:
        x, y = next(ia, None), next(ib, None)
        if x is None and y is None:
            return na, nb, nd
        na += x is not None
        nb += y is not None
        nd += x != y


def prep(args, work: Path) -> None:
    data = Path(args.data)
    refs, reads = work / "refs", work / "reads"
    refs.mkdir(parents=True, exist_ok=True)
    reads.mkdir(exist_ok=True)
    want = [WORKLOADS[w] for w in selected(args)]
    ref_names = {w[1] for w in want} | {SIMS[f.rsplit("_", 1)[0]][0] for w in want for f in w[2]
                                         if f.rsplit("_", 1)[0] in SIMS}
    for r in sorted(ref_names):
        fa = refs / f"{r}.fa"
        if not fa.exists():
            with gzip.open(find(data, REFS[r]), "rb") as fi, open(fa, "wb") as fo:
                shutil.copyfileobj(fi, fo, 1 << 22)
    bwa_jobs = []
    for r in sorted({w[1] for w in want if w[0].startswith("mem")}):
        fa = refs / f"{r}.fa"
        if not Path(f"{fa}.bwt").exists():
            bwa_jobs.append(subprocess.Popen(f"bwa index {fa} > {fa}.bwa_index.log 2>&1", shell=True))
    sims = sorted({f.rsplit("_", 1)[0] for w in want for f in w[2]})
    for s in sims:
        if s in REAL:
            for i, f in enumerate(REAL[s], 1):
                dst = reads / f"{s}_{i}.fq"
                if not dst.exists():
                    src = find(data, f)
                    n = args.pacbio_reads if s == "pacbio" else 0
                    with gzip.open(src, "rb") as fi, open(dst, "wb") as fo:
                        for k, line in enumerate(fi):
                            if n and k >= 4 * n:
                                break
                            fo.write(line)
            continue
        simulate(args, s, refs, reads)
    for r in sorted({w[1] for w in want if w[0].startswith("mem")}):
        fa = refs / f"{r}.fa"
        if not Path(f"{fa}.g3i").exists():
            wall, rss, rc = run_timed(f"{args.g3} index {fa}", work / f"g3index_{r}.txt", work / f"g3index_{r}.err")
            log(f"g3align index {r}: {wall:.1f} s, rc {rc}")
    t = time.perf_counter()
    for j in bwa_jobs:
        j.wait()
    log(f"bwa index done ({time.perf_counter() - t:.0f} s waited)")


def simulate(args, s: str, refs: Path, reads: Path) -> None:
    ref, tool, extra, n_gpu, n_cpu = SIMS[s]
    n = n_gpu if args.size == "gpu" else n_cpu
    fa = refs / f"{ref}.fa"
    r1, r2 = reads / f"{s}_1.fq", reads / f"{s}_2.fq"
    if r1.exists():
        return
    t = time.perf_counter()
    if tool == "wgsim":
        subprocess.run(f"wgsim -N {n} {extra} {fa} {r1} {r2} > {reads}/{s}.wgsim.log 2>&1", shell=True, check=True)
    elif tool == "dwgsim":  # in parallel pieces (seed + piece), concatenated in piece order
        k = max(1, min(args.threads, n // 20000))
        per = -(-n // k)
        z = int(extra.split()[1])
        rest = " ".join(extra.split()[2:])
        procs = [subprocess.Popen(f"dwgsim -z {z + i} -N {per} {rest} -o 1 {fa} {reads}/{s}.p{i}", shell=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(k)]
        for p in procs:
            if p.wait():
                sys.exit(f"[bench] dwgsim failed for {s}")
        for end, dst in ((1, r1), (2, r2)):
            with open(dst, "wb") as fo:
                for i in range(k):
                    src = Path(f"{reads}/{s}.p{i}.bwa.read{end}.fastq.gz")
                    with gzip.open(src, "rb") as fi:
                        shutil.copyfileobj(fi, fo, 1 << 22)
        for f in reads.glob(f"{s}.p*"):
            f.unlink()
    else:  # pbsim CLR: one FASTQ per reference sequence (sd_NNNN.fastq), concatenated
        model = args.pbsim_model or "/usr/share/pbsim/models/model_qc_clr"
        d = reads / f"{s}.pbsim"
        d.mkdir(exist_ok=True)
        subprocess.run(f"cd {d} && pbsim --data-type CLR --model_qc {model} {extra.format(depth=n)} "
                       f"{fa.resolve()} > pbsim.log 2>&1", shell=True, check=True)
        with open(r1, "wb") as fo:
            for f in sorted(d.glob("sd_*.fastq")):
                fo.write(f.read_bytes())
        shutil.rmtree(d)
    log(f"simulated {s} ({tool}, {n}) in {time.perf_counter() - t:.0f} s")


def fastq_stats(path: Path) -> dict:
    """Reads and bases of a FASTQ file (kept beside it as NAME.stats.json)."""
    st = path.with_suffix(".stats.json")
    if st.exists():
        return json.loads(st.read_text())
    n = bases = 0
    with open(path, "rb") as f:
        for k, line in enumerate(f):
            if k % 4 == 1:
                n += 1
                bases += len(line) - 1
    st.write_text(json.dumps({"reads": n, "bases": bases}))
    return {"reads": n, "bases": bases}


def fasta_length(path: Path) -> int:
    st = path.with_suffix(".len")
    if not st.exists():
        with open(path, "rb") as f:
            st.write_text(str(sum(len(line) - 1 for line in f if not line.startswith(b">"))))
    return int(st.read_text())


def selected(args) -> list[str]:
    if not args.only:
        return list(WORKLOADS)
    names = [w for w in args.only.split(",") if w]
    bad = [w for w in names if w not in WORKLOADS]
    if bad:
        sys.exit(f"[bench] unknown workload(s): {', '.join(bad)}")
    return names


def run(args, work: Path) -> None:
    refs, reads, outs = work / "refs", work / "reads", work / "out"
    outs.mkdir(exist_ok=True)
    warmed = set()
    for name in selected(args):
        mode, ref, files, peer, g3 = WORKLOADS[name]
        fa = refs / f"{ref}.fa"
        rf = [reads / f"{f}.fq" for f in files]
        fmt = dict(t=args.threads, ref=fa, r1=rf[0], r2=rf[-1])
        g3cmd = f"{args.g3} {g3.format(**fmt)}"
        key = g3.split()[0] + (" ".join(g3.split()[1:3]) if g3.startswith("map") else str(len(files)))
        if key not in warmed:  # untimed: compiles on a fresh machine, loads the index into the page cache
            small = []
            for i, f in enumerate(rf):
                small.append(work / f"warm_{i}.fq")
                with open(f, "rb") as fi, open(small[-1], "wb") as fo:
                    for k, line in enumerate(fi):
                        if k >= 4000:
                            break
                        fo.write(line)
            w = dict(fmt, r1=small[0], r2=small[-1])
            wall, _, rc = run_timed(f"{args.g3} {g3.format(**w)}", outs / "warm.sam", outs / "warm.err")
            log(f"warm-up for {key!r}: {wall:.0f} s, rc {rc}")
            warmed.add(key)
        for f in [fa, *[Path(f"{fa}.{x}") for x in ("bwt", "sa", "pac", "g3i")], *rf]:
            if f.exists():
                with open(f, "rb") as fi:
                    while fi.read(1 << 24):
                        pass
        stats = [fastq_stats(f) for f in rf]
        bases = sum(x["bases"] for x in stats)
        res = {"workload": name, "mode": mode, "date": time.strftime("%Y-%m-%d"), "size": args.size,
               "threads": args.threads, "device": args.device_name, "peer_cmd": peer.format(**fmt), "g3_cmd": g3cmd,
               "reads": sum(x["reads"] for x in stats), "bases": bases, "depth": round(bases / fasta_length(fa), 2)}
        for side, cmd in (("peer", peer.format(**fmt)), ("g3", g3cmd)):
            wall, rss, rc = run_timed(cmd, outs / f"{name}.{side}.sam", outs / f"{name}.{side}.err")
            res[f"{side}_s"], res[f"{side}_rss_mib"], res[f"{side}_rc"] = round(wall, 2), round(rss), rc
        na, nb, nd = compare(outs / f"{name}.g3.sam", outs / f"{name}.peer.sam")
        res.update(g3_records=na, peer_records=nb, records_differing=nd,
                   identical=na == nb and nd == 0 and res["g3_rc"] == 0 and res["peer_rc"] == 0,
                   ratio=round(res["peer_s"] / res["g3_s"], 2) if res["g3_s"] > 0 else None)
        with open(work / "results.jsonl", "a") as f:
            f.write(json.dumps(res) + "\n")
        log(f"{name}: peer {res['peer_s']} s, g3align {res['g3_s']} s, {res['ratio']}x, "
            f"identical {res['identical']} ({nd} of {na} records differ)")
        if not args.keep:
            for side in ("peer", "g3"):
                (outs / f"{name}.{side}.sam").unlink()


def report(work: Path) -> str:
    rows = {}
    path = work / "results.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            rows[r["workload"]] = r  # the latest run of each workload
    lines = ["| workload | mode | reads | depth | peer | peer s | g3align s | ratio | peer / g3align RSS MiB "
             "| identical |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.values():
        same = "yes" if r["identical"] else f"no ({r['records_differing']} of {r['g3_records']} records differ)"
        lines.append(f"| {r['workload']} | {r['mode']} | {r.get('reads', 0):,} | {r.get('depth', 0):g}x | "
                     f"{r['peer_cmd'].split()[0]} | {r['peer_s']:.2f} | "
                     f"{r['g3_s']:.2f} | {r['ratio']:.2f}x | {r['peer_rss_mib']} / {r['g3_rss_mib']} | {same} |")
    modes: dict = {}
    for r in rows.values():
        modes.setdefault(r["mode"], []).append(r["ratio"])
    lines += ["", "| mode | workloads | minimum ratio | median ratio |", "|---|---|---|---|"]
    for m, v in sorted(modes.items()):
        v = sorted(v)
        lines.append(f"| {m} | {len(v)} | {v[0]:.2f}x | {v[len(v) // 2]:.2f}x |")
    text = "\n".join(lines) + "\n"
    (work / "results.md").write_text(text)
    return text


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--work", required=True)
    ap.add_argument("--size", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--phase", choices=["prep", "run", "all", "report"], default="all")
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--g3", default=f"env G3ALIGN_DETACH=0 {shlex.quote(sys.executable)} -m g3align.aligner.cli",
                    help="how to run g3align (G3ALIGN_DETACH=0: the timed process is the one that aligns, so its "
                         "RSS is measured, and its exit is in its time as bwa's is in bwa's)")
    ap.add_argument("--bin", default="", help="a folder searched first for bwa, minimap2, dwgsim, wgsim, pbsim")
    ap.add_argument("--pbsim-model", default="")
    ap.add_argument("--pacbio-reads", type=int, default=0, help="only the first N real PacBio reads (0: all)")
    ap.add_argument("--device-name", default="")
    ap.add_argument("--keep", action="store_true", help="keep the SAM outputs")
    ap.add_argument("--list", action="store_true", help="print the workloads and exit")
    args = ap.parse_args(argv)
    if args.list:
        for k, v in WORKLOADS.items():
            print(f"{k}\t{v[0]}\t{v[1]}\t{' '.join(v[2])}")
        return
    if args.bin:
        os.environ["PATH"] = f"{Path(args.bin).resolve()}:{os.environ['PATH']}"
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.phase in ("prep", "all"):
        prep(args, work)
    if args.phase in ("run", "all"):
        run(args, work)
    print(report(work), end="")


if __name__ == "__main__":
    main()
