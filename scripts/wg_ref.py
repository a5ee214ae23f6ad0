#!/usr/bin/env python3
"""A GRCh38-sized stand-in reference (`make wg-ref`), built deterministically from the shared references: no human
genome can be downloaded where g3align is developed and benchmarked. **It is a stand-in, not a genome.**

Layout: 25 chromosomes (chr1..chr22, chrX, chrY, chrM) with GRCh38's relative lengths, scaled to --size bases
(default 3.1 Gbp), then --alts ALT-like contigs (chrN_altK, 50-500 kb at full size). Each chromosome is a chain of
segments, each drawn (with its own seeded generator) from:
  - a window of a source sequence (mostly human chr20; also E. coli, phages, viruses, mtDNA) copied at a divergence
    of 5-15 % (substitutions, and 1-10 base insertions and deletions at a tenth of that rate), either strand, so that
    the many copies of the one human source stay unique to short reads;
  - a segmental duplication: a copy of an earlier stretch of the same chromosome at 0.1-5 % divergence
    (log-uniform), either strand (~6 % of the bases);
  - a tandem repeat: a 2-200 bp unit repeated to 1-20 kb with 0-5 % divergence;
plus N gaps: 10 kb at each end (telomeres), one centromere-like block of 1-3 % of the chromosome, and scattered
gaps of 1-50 kb. ALT contigs copy a stretch of a chromosome at 0.1-2 % divergence; their names go to PREFIX.alt
(one per line, the first column being what bwa reads from an .alt file).

    python scripts/wg_ref.py --out DIR [--size 3.1e9] [--alts 100] [--seed 1] [--jobs N] [--sources FILE ...]

Writes DIR/wg.fa (60 bases a line) and DIR/wg.fa.alt, and prints the contigs' lengths and the build time. The same
arguments give the same bytes (chromosomes are built in parallel, each from its own seed).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

# GRCh38 primary chromosome lengths (Mbp, rounded), chrM in bp
GRCH38_MB = [248.96, 242.19, 198.30, 190.21, 181.54, 170.81, 159.35, 145.14, 138.39, 133.80, 135.09, 133.28,
             114.36, 107.04, 101.99, 90.34, 83.26, 80.37, 58.62, 64.44, 46.71, 50.82, 156.04, 57.23]
NAMES = [f"chr{i}" for i in range(1, 23)] + ["chrX", "chrY"]
CHRM_BP = 16569
SEGDUP = 0.3  # the chance that a segment is a segmental duplication (~6 % of the bases, as in GRCh38's ~5 %)
DEFAULT_SOURCES = ["human_GRCh37_chr20.fa.gz", "ecoli_K12_MG1655.fa.gz", "lambda_phage_NC_001416.fa.gz",
                   "hiv1_iva_reference.fa.gz", "honeybee_viruses_DWV_VDV1.fa.gz", "human_MT.fa.gz"]
ACGT = np.frombuffer(b"ACGT", np.uint8)
COMP = np.zeros(256, np.uint8)
for _a, _b in zip(b"ACGTN", b"TGCAN"):
    COMP[_a] = _b

_SRC: list[np.ndarray] = []   # the source sequences (uppercase, A/C/G/T/N only), set in each worker
_W: np.ndarray | None = None  # their weights


def read_sources(paths: list[str]) -> list[np.ndarray]:
    """Every record of the source FASTA files (read by g3align's reader) as uppercase A/C/G/T bytes, each run of
    ambiguous characters as N."""
    from g3align.index.fasta import read_fasta
    out = []
    for p in paths:
        ref = read_fasta(p)
        seq = ACGT[ref.pac]
        for o, ln in zip(ref.hole_off.tolist(), ref.hole_len.tolist()):
            seq[o:o + ln] = ord("N")
        out += [seq[a:b] for a, b in zip(ref.offsets[:-1].tolist(), ref.offsets[1:].tolist())]
    return out


def _init(seqs: list[np.ndarray]) -> None:
    global _SRC, _W
    _SRC = seqs
    # human sequence dominates, as in a real genome; small genomes stay a minority of the bases drawn
    _W = np.array([len(s) ** 1.0 for s in _SRC], np.float64)
    _W /= _W.sum()


def mutate(rng: np.random.Generator, a: np.ndarray, d: float) -> np.ndarray:
    """A copy of `a` with substitutions at rate d and insertions / deletions of 1-10 bases at rate d / 10 each
    (N bases stay N)."""
    a = a.copy()
    n = a.size
    if n == 0 or d <= 0:
        return a
    k = rng.binomial(n, d)
    pos = rng.integers(0, n, k)
    keep = a[pos] != ord("N")
    pos = pos[keep]
    a[pos] = ACGT[(np.searchsorted(ACGT, a[pos]) + rng.integers(1, 4, pos.size)) % 4]
    n_indel = rng.binomial(n, d / 10)
    if n_indel:
        where = np.sort(rng.integers(0, n, n_indel))
        lens = rng.integers(1, 11, n_indel)
        is_del = rng.random(n_indel) < 0.5
        cover = np.zeros(n + 11, np.int32)                # deletions: +1 at a start, -1 past its end
        np.add.at(cover, where[is_del], 1)
        np.add.at(cover, where[is_del] + lens[is_del], -1)
        keep = np.cumsum(cover[:n]) == 0
        ins_at, ins_len = where[~is_del], lens[~is_del]
        ins = ACGT[rng.integers(0, 4, int(ins_len.sum()))]
        a = np.insert(a, np.repeat(ins_at, ins_len), ins)
        keep = np.insert(keep, np.repeat(ins_at, ins_len), True)
        a = a[keep]
    return a


def revcomp(a: np.ndarray) -> np.ndarray:
    return COMP[a[::-1]]


def build_chrom(args: tuple) -> tuple[str, int, str]:
    """One chromosome: (name, length, path of its sequence bytes)."""
    name, length, seed, tmp = args
    rng = np.random.default_rng(seed)
    parts: list[np.ndarray] = []
    have = 0
    tel = min(10_000, length // 20)
    cen_at = int(length * rng.uniform(0.3, 0.6))
    cen_len = int(length * rng.uniform(0.01, 0.03))
    parts.append(np.full(tel, ord("N"), np.uint8))
    have += tel
    cen_done = False
    body = length - 2 * tel
    while have < tel + body:
        left = tel + body - have
        if not cen_done and have >= cen_at:
            n = min(cen_len, left)
            parts.append(np.full(n, ord("N"), np.uint8))
            have += n
            cen_done = True
            continue
        r = rng.random()
        if r < SEGDUP and have > 400_000:          # segmental duplication of an earlier stretch, 0.1-5 %
            seg = np.concatenate(parts[-64:]) if len(parts) > 1 else parts[0]
            n = int(min(left, rng.integers(10_000, 300_000), seg.size))
            b = int(rng.integers(0, seg.size - n + 1))
            piece = mutate(rng, seg[b:b + n], float(np.exp(rng.uniform(np.log(0.001), np.log(0.05)))))
            if rng.random() < 0.5:
                piece = revcomp(piece)
        elif r < SEGDUP + 0.02:                     # tandem repeat
            unit = ACGT[rng.integers(0, 4, int(rng.integers(2, 201)))]
            n = int(min(left, rng.integers(1_000, 20_001)))
            piece = mutate(rng, np.resize(unit, n), rng.uniform(0.0, 0.05))
        elif r < SEGDUP + 0.025:                    # a scattered gap
            piece = np.full(int(min(left, rng.integers(1_000, 50_001))), ord("N"), np.uint8)
        else:                                       # a window of a source sequence at some divergence
            src = _SRC[int(rng.choice(len(_SRC), p=_W))]
            n = int(min(left, rng.integers(200_000, 2_000_001), src.size))
            b = int(rng.integers(0, src.size - n + 1))
            # far from every other copy of its source (5-15 %), so that reads map uniquely there, as in the unique
            # part of a real genome; the near-identical copies are the segmental duplications
            d = float(rng.uniform(0.05, 0.15))
            piece = mutate(rng, src[b:b + n], d)
            if rng.random() < 0.5:
                piece = revcomp(piece)
        piece = piece[:left]
        parts.append(piece)
        have += piece.size
    parts.append(np.full(tel, ord("N"), np.uint8))
    seq = np.concatenate(parts)[:length]
    path = Path(tmp) / f"{name}.seq"
    seq.tofile(path)
    return name, int(seq.size), str(path)


def build_alt(args: tuple) -> tuple[str, int, str]:
    """An ALT-like contig: a stretch of a built chromosome at 0.1-2 % divergence."""
    name, chrom_path, length, seed, tmp = args
    rng = np.random.default_rng(seed)
    chrom = np.fromfile(chrom_path, np.uint8)
    n = min(length, chrom.size)
    for _ in range(20):   # prefer a stretch without many N
        b = int(rng.integers(0, chrom.size - n + 1))
        if np.count_nonzero(chrom[b:b + n] == ord("N")) < n // 10:
            break
    seq = mutate(rng, chrom[b:b + n], float(np.exp(rng.uniform(np.log(0.001), np.log(0.02)))))
    path = Path(tmp) / f"{name}.seq"
    seq.tofile(path)
    return name, int(seq.size), str(path)


def write_fasta(out, name: str, path: str, width: int = 60) -> None:
    seq = np.fromfile(path, np.uint8)
    out.write(f">{name}\n".encode())
    full = seq.size // width * width
    if full:
        rows = np.empty((full // width, width + 1), np.uint8)
        rows[:, :width] = seq[:full].reshape(-1, width)
        rows[:, width] = 10
        out.write(rows.tobytes())
    if seq.size > full:
        out.write(seq[full:].tobytes() + b"\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=float, default=3.1e9, help="bases in the 25 chromosomes [3.1e9]")
    ap.add_argument("--alts", type=int, default=100, help="ALT-like contigs [100]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"),
                    help="where the default sources are (ref/ or flat)")
    ap.add_argument("--sources", nargs="*", help="source FASTA files (default: the shared references)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.sources:
        paths = args.sources
    else:
        data = Path(args.data)
        paths = []
        for f in DEFAULT_SOURCES:
            p = next((q for q in (data / f, data / "ref" / f) if q.exists()), None)
            if p is None:
                sys.exit(f"[wg_ref] {f} not found under {data} (give --data or --sources)")
            paths.append(str(p))
    out = Path(args.out)
    tmp = out / "wg_parts"
    tmp.mkdir(parents=True, exist_ok=True)
    total_mb = sum(GRCH38_MB)
    lengths = [max(20_000, int(args.size * mb / total_mb)) for mb in GRCH38_MB]
    jobs = [(nm, ln, args.seed * 1000 + i, str(tmp)) for i, (nm, ln) in enumerate(zip(NAMES, lengths))]
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i][1])   # longest first: the pool ends together
    sources = read_sources(paths)   # once, here; the workers get them with their start
    with ProcessPoolExecutor(max(1, args.jobs), initializer=_init, initargs=(sources,)) as ex:
        built = dict(zip([jobs[i][0] for i in order], ex.map(build_chrom, [jobs[i] for i in order])))
        chroms = [built[nm] for nm in NAMES]
        rng = np.random.default_rng(args.seed)
        scale = min(1.0, args.size / 3.1e9)
        alt_jobs = []
        for k in range(args.alts):
            c = int(rng.integers(0, len(NAMES)))
            ln = int(rng.integers(50_000, 500_001) * scale) + 1_000
            alt_jobs.append((f"{NAMES[c]}_alt{k + 1}", chroms[c][2], ln, args.seed * 1000 + 500 + k, str(tmp)))
        alts = list(ex.map(build_alt, alt_jobs))
    mt_files = [p for p in paths if "MT" in Path(p).name]
    m = read_sources(mt_files[:1])[0] if mt_files else np.full(CHRM_BP, ord("N"), np.uint8)
    (tmp / "chrM.seq").write_bytes(m.tobytes())
    contigs = chroms + [("chrM", int(m.size), str(tmp / "chrM.seq"))] + alts
    with open(out / "wg.fa", "wb") as f:
        for name, _, path in contigs:
            write_fasta(f, name, path)
    (out / "wg.fa.alt").write_text("".join(f"{a[0]}\n" for a in alts))
    for _, _, path in contigs:
        os.unlink(path)
    tmp.rmdir()
    n = sum(c[1] for c in contigs)
    print(f"[wg_ref] {out / 'wg.fa'}: {len(contigs)} contigs, {n:,} bp ({len(alts)} ALT-like, "
          f"{sum(a[1] for a in alts):,} bp) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
