"""`g3align warmup`'s plan: the data and the runs that compile every kernel for this machine ahead of the first real
run (aligner/cli/warmup.py is the command; scripts/jit_manifest.py runs the same plan to list the kernels).

The compiled CPU kernels (numba) go to g3align's per-user cache (g3align/jit.py) and the CUDA modules to
CuPy's kernel cache, so a later `index`, `mem`, `map` or `align` only loads them. numba compiles a kernel for
the argument types it is called with, so the surest way to compile what a run needs is to make such runs:
warmup writes a small synthetic data set (a random two-contig reference with a repeat and an N run, short
single and paired reads, long noisy reads, pairwise pairs; the same every time) and runs the subcommands on
it, each in its own process, as many at once as `-t` allows. The runs that share kernels are ordered so that
the later ones find most of their kernels compiled by the earlier ones: one bwa-mem run, one minimap2 run
and a pairwise run first (in parallel), then their variants, then the one-thread runs. The output of these
runs is discarded; their exit codes are checked.
"""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from g3align import jit

_COMP = bytes.maketrans(b"ACGTN", b"TGCAN")


def _mutate(rng, s: bytes, sub: float, indel: float) -> bytes:
    """s with substitutions and 1-3 bp insertions / deletions at the given per-base rates."""
    out = bytearray()
    i = 0
    while i < len(s):
        r = rng.random()
        if r < sub:
            out.append(b"ACGT"[(b"ACGT".index(s[i]) + 1 + rng.integers(3)) % 4] if s[i] in b"ACGT" else s[i])
            i += 1
        elif r < sub + indel / 2:
            out += np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, rng.integers(1, 4))].tobytes()
        elif r < sub + indel:
            i += int(rng.integers(1, 4))
        else:
            out.append(s[i])
            i += 1
    return bytes(out)


def _fq(name: str, seq: bytes) -> str:
    return f"@{name}\n{seq.decode()}\n+\n{'I' * len(seq)}\n"


def make_data(d: Path, seed: int = 11) -> dict:
    """Write the warm-up inputs into d; returns their paths by role."""
    rng = np.random.default_rng(seed)
    acgt = np.frombuffer(b"ACGT", np.uint8)
    chr1 = bytearray(acgt[rng.integers(0, 4, 60000)].tobytes())
    chr2 = bytearray(acgt[rng.integers(0, 4, 25000)].tobytes())
    chr1[40000:42000] = chr1[10000:12000]  # a repeat: secondary hits, XA tags, MAPQ 0
    chr2[5000:6500] = chr1[20000:21500]  # one shared across contigs
    chr1[30000:30060] = b"N" * 60  # an N run (index holes)
    ref = {"chrA": bytes(chr1), "chrB": bytes(chr2)}
    (d / "ref.fa").write_text("".join(f">{k}\n{v.decode()}\n" for k, v in ref.items()))

    r1, r2, lr = [], [], []
    names = list(ref)
    for i in range(600):
        c = ref[names[i % 2]]
        ins = int(rng.normal(350, 40))
        p = int(rng.integers(0, len(c) - ins))
        frag = c[p:p + ins]
        if i % 3 == 0:  # a chimeric fragment: split (supplementary) alignments
            frag = frag[:ins // 2] + ref[names[(i + 1) % 2]][1000 + i:1000 + i + ins - ins // 2]
        a, b = _mutate(rng, frag[:150], 0.01, 0.002), _mutate(rng, frag[-150:].translate(_COMP)[::-1], 0.01, 0.002)
        if i % 2:
            a, b = b, a
        if i % 50 == 7:  # an unmapped pair
            a = acgt[rng.integers(0, 4, 150)].tobytes()
        r1.append(_fq(f"p{i}/1", a))
        r2.append(_fq(f"p{i}/2", b))
    # a pair of 1.2 kb reads: the GPU path chains such reads with the CPU twin (memstage.chain_reads)
    p = int(rng.integers(0, len(ref["chrA"]) - 1600))
    frag = ref["chrA"][p:p + 1600]
    r1.append(_fq("long/1", _mutate(rng, frag[:1200], 0.01, 0.002)))
    r2.append(_fq("long/2", _mutate(rng, frag[-1200:].translate(_COMP)[::-1], 0.01, 0.002)))
    (d / "r1.fq").write_text("".join(r1))
    (d / "r2.fq").write_text("".join(r2))

    for i in range(40):
        c = ref[names[i % 2]]
        n = int(rng.integers(1500, 6000))
        p = int(rng.integers(0, len(c) - n))
        s = c[p:p + n]
        if i % 5 == 0:  # chimeric: supplementary alignments
            s = s[: n // 2] + ref[names[(i + 1) % 2]][2000:2000 + n // 2]
        if i % 2:
            s = s.translate(_COMP)[::-1]
        lr.append(_fq(f"lr{i}", _mutate(rng, s, 0.03, 0.06)))
    (d / "long.fq").write_text("".join(lr))

    q, t = [], []
    for i in range(64):
        n = int(rng.integers(60, 260))
        s = acgt[rng.integers(0, 4, n)].tobytes()
        t.append(f">t{i}\n{s.decode()}\n")
        q.append(f">q{i}\n{_mutate(rng, s[int(rng.integers(0, 20)):], 0.05, 0.03).decode()}\n")
    (d / "q.fa").write_text("".join(q))
    (d / "t.fa").write_text("".join(t))
    for name in ("ref.fa", "r1.fq", "long.fq"):  # gzip input takes a reader path of its own
        (d / f"{name}.gz").write_bytes(gzip.compress((d / name).read_bytes(), compresslevel=1))
    return {"ref": d / "ref.fa", "r1": d / "r1.fq", "r2": d / "r2.fq", "long": d / "long.fq",
            "ref_gz": d / "ref.fa.gz", "r1_gz": d / "r1.fq.gz", "long_gz": d / "long.fq.gz",
            "q": d / "q.fa", "t": d / "t.fa", "idx": d / "ref"}


def plan(p: dict, devices: list[str]) -> list[list[list[str]]]:
    """The runs, as waves: each wave's runs go in parallel; a wave starts when the one before it is done. Several
    threads and one thread take different kernels (ranges claimed by threads, or one range), so both are run."""
    ref, idx, r1, r2, lr = (str(p[k]) for k in ("ref", "idx", "r1", "r2", "long"))
    ref_gz, r1_gz, lr_gz = (str(p[k]) for k in ("ref_gz", "r1_gz", "long_gz"))
    first, second, third = [], [], []
    for dev in devices:
        d = ["--device", dev]
        first += [["mem", *d, "-t", "2", idx, r1_gz], ["map", *d, "-t", "2", "-ax", "map-pb", ref_gz, lr_gz]]
        second += [["mem", *d, "-t", "2", idx, r1, r2], ["map", *d, "-t", "2", "-ax", "map-ont", ref, lr],
                   ["map", *d, "-t", "2", "-cx", "map-hifi", "--cs", ref, lr],
                   ["map", *d, "-t", "2", "-ax", "sr", ref, r1], ["map", *d, "-t", "2", "-x", "map-ont", ref, lr]]
        third += [["mem", *d, "-t", "1", idx, r1], ["mem", *d, "-t", "1", idx, r1, r2],
                  ["map", *d, "-t", "1", "-ax", "map-ont", ref, lr], ["map", *d, "-t", "2", "-ax", "sr", ref, r1, r2]]
        for mode in ("global", "semiglobal", "local"):
            for tb in ("--traceback", "--no-traceback"):
                (first if (mode, tb) == ("local", "--traceback") else second).append(
                    ["align", *d, "--mode", mode, tb, str(p["q"]), str(p["t"])])
            second.append(["align", *d, "--mode", mode, "-O", "0", str(p["q"]), str(p["t"])])
    return [[["index", "-p", idx, "-x", "map-ont,map-pb,sr", ref]], first, second, third]


def _devices(choice: str) -> list[str]:
    """auto: the CPU paths, and the GPU paths too where there is a GPU (`--device auto` runs the GPU's, and
    `--device cpu` stays possible there)."""
    if choice == "auto":
        return ["gpu", "cpu"] if _gpu_present() else ["cpu"]
    return [choice]


def _gpu_present() -> bool:
    """A CUDA device CuPy sees (CuPy is imported only where an NVIDIA driver's device file exists)."""
    if not os.path.exists("/dev/nvidiactl"):
        return False
    from g3align.aligner.gpu.device import gpu_available
    return gpu_available()


# G3ALIGN_TUNE of the warm-up's runs: their small references are scanned in pieces too (index/fasta.py's threaded
# scan of a large FASTA), so that those kernels are compiled and listed (scripts/jit_manifest.py) with the rest
RUN_TUNE = "SCAN_PIECE=512"


def run_tune(environ) -> str:
    """G3ALIGN_TUNE for a warm-up run: the caller's, then RUN_TUNE."""
    return ",".join(x for x in (environ.get("G3ALIGN_TUNE", ""), RUN_TUNE) if x)


def run(threads: int, device: str, log=sys.stderr) -> int:
    """Compile for this machine; returns the number of failed runs (0: all compiled)."""
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="g3align-warmup-"))
    failed = 0
    try:
        p = make_data(work)
        env = dict(os.environ, G3ALIGN_COMPILE_NOTE="0", G3ALIGN_DETACH="0", G3ALIGN_PRECOMPILE="0",
                   G3ALIGN_TUNE=run_tune(os.environ))
        devices = _devices(device)
        log.write(f"[M::warmup] compiling for {', '.join(devices)} into {jit.cache_dir()} with {threads} "
                  f"processes\n")
        log.flush()
        # every command's listed kernels first, shared out over the processes (jit.precompile); the runs then
        # check them and compile what the list lacks
        jit.precompile(jit.jobs(devices), threads=threads, log=log)

        def one(args):
            t = time.perf_counter()
            # cwd: the scratch folder, so that no g3align/ folder of the caller's (a source checkout) shadows
            # the installed package on `-m`'s path
            r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args], env=env, cwd=work,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            return args, r.returncode, r.stderr, time.perf_counter() - t

        for wave in plan(p, devices):
            with ThreadPoolExecutor(max(1, threads)) as ex:
                for args, rc, err, dt in ex.map(one, wave):
                    shown = " ".join(a if not a.startswith(str(work)) else os.path.basename(a) for a in args)
                    if rc != 0:
                        failed += 1
                        last = (err.strip().splitlines() or ["(no message)"])[-1]
                        log.write(f"[E::warmup] g3align {shown}: exit {rc}: {last}\n")
                    else:
                        log.write(f"[M::warmup] {dt:6.1f} s  g3align {shown}\n")
                    log.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.write(f"[M::warmup] done in {time.perf_counter() - t0:.1f} s{'' if not failed else f', {failed} failed'}\n")
    return failed
