"""`g3align align [options] queries.fa targets.fa`: pairwise DP alignment of pairs taken by order.

Output: TSV to stdout (or -o), one line per pair, PAF-like columns, coordinates 0-based half-open:
  qname qlen q_start q_end tname tlen t_start t_end score cigar
(q_start/t_start are -1 and cigar is `*` where they were not computed, i.e. without --traceback.)
The engine and its conventions: aligner/pairwise.py.  Registered in aligner/cli.py.
"""
from __future__ import annotations

import gzip
import sys
import zlib

import click


def read_fasta(path: str) -> tuple[list[str], list[str]]:
    """FASTA[.gz] (or '-') -> (names, sequences); sequences are not validated here."""
    if path == "-":
        fh = sys.stdin.buffer
    else:
        try:
            fh = open(path, "rb")
        except OSError as e:
            raise click.ClickException(f"{path}: {e.strerror}")
        if fh.peek(2)[:2] == b"\x1f\x8b":
            fh = gzip.GzipFile(fileobj=fh)
    names: list[str] = []
    parts: list[list[bytes]] = []
    try:
        for line in fh:
            line = line.rstrip(b"\r\n")
            if line.startswith(b">"):
                names.append(line[1:].split(maxsplit=1)[0].decode() if line[1:].strip() else "")
                parts.append([])
            elif line:
                if not parts:
                    raise click.ClickException(f"{path}: not FASTA (sequence before the first '>')")
                parts[-1].append(line.strip())
    except UnicodeDecodeError:
        raise click.ClickException(f"{path}: record {len(names)}: the name is not UTF-8 text (not FASTA?)")
    except (OSError, EOFError, zlib.error) as e:
        raise click.ClickException(f"{path}: truncated or corrupt input after record {max(0, len(names) - 1)} "
                                   f"({type(e).__name__})")
    return names, [b"".join(p).decode("latin-1") for p in parts]


@click.command("align", context_settings={"help_option_names": ["--help"]})
@click.option("--mode", type=click.Choice(["global", "semiglobal", "local"]), default="global",
              show_default=True, help="semiglobal = whole query inside the target")
@click.option("-A", "--match", type=int, default=1, show_default=True, help="match score")
@click.option("-B", "--mismatch", type=int, default=4, show_default=True, help="mismatch penalty")
@click.option("-O", "--gap-open", type=int, default=6, show_default=True,
              help="gap open penalty (a gap of length L costs O + L*E; 0 = linear gaps)")
@click.option("-E", "--gap-extend", type=int, default=1, show_default=True, help="gap extension penalty")
@click.option("--traceback/--no-traceback", default=False, help="compute start coordinates and CIGAR")
@click.option("-w", "--band", type=int, default=None, help="restrict cells to |i - j| <= INT")
@click.option("--device", type=click.Choice(["auto", "gpu", "cpu"]), default="auto", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="output TSV [stdout]")
@click.argument("queries")
@click.argument("targets")
def align_cmd(queries, targets, mode, match, mismatch, gap_open, gap_extend, traceback, band, device,
              output):
    """Align query k against target k for every k (FASTA, pairs by order) and write a TSV."""
    if output is None and sys.stdout is None:
        raise click.ClickException("cannot write to standard output: it is closed (give -o FILE)")
    qn, qs = read_fasta(queries)
    tn, ts = read_fasta(targets)
    if len(qs) != len(ts):
        raise click.ClickException(f"{len(qs)} queries but {len(ts)} targets: the files must hold an "
                                   "equal number of records (pairs are taken by order)")
    try:
        from g3align import jit
        jit.note_expect("the pairwise kernels", "1")
        from g3align.aligner.cli import _gpu_machine  # (cli imports this module: not at the top)
        jit.precompile(f"align-{'gpu' if _gpu_machine(device) else 'cpu'}")
        from g3align.aligner.pairwise import align_pairs  # here: `g3align mem` / `map` need not import it
        r = align_pairs(qs, ts, mode=mode, match=match, mismatch=mismatch, gap_open=gap_open,
                        gap_extend=gap_extend, traceback=traceback, band=band, device=device)
    except (ValueError, RuntimeError, NotImplementedError) as e:
        raise click.ClickException(str(e))
    try:
        out = open(output, "w") if output else sys.stdout  # noqa: SIM115 (closed below)
        try:
            out.write("#qname\tqlen\tq_start\tq_end\ttname\ttlen\tt_start\tt_end\tscore\tcigar\n")
            for k in range(len(r)):
                cig = r.cigar_string(k) if traceback else "*"
                out.write(f"{qn[k]}\t{len(qs[k])}\t{r.q_start[k]}\t{r.q_end[k]}\t{tn[k]}\t{len(ts[k])}\t"
                          f"{r.t_start[k]}\t{r.t_end[k]}\t{r.score[k]}\t{cig or '*'}\n")
        finally:
            if output:
                out.close()
            else:
                out.flush()
    except OSError as e:
        raise click.ClickException(f"{output or 'standard output'}: {e.strerror or e}")
