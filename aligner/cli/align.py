"""`g3align align [options] queries.fa targets.fa`: pairwise DP alignment of pairs taken by order.

Input: two FASTA or FASTQ files (plain or gzip, '-' for stdin; aligner/io/reads.py), read in lockstep and aligned
CHUNK_PAIRS pairs at a time, so memory stays bounded: parsing (a thread per file), aligning and writing overlap.
Output: TSV to stdout (or -o), one line per pair, PAF-like columns, coordinates 0-based half-open:
  qname qlen q_start q_end tname tlen t_start t_end score cigar
(q_start/t_start are -1 and cigar is `*` where they were not computed, i.e. without --traceback.)
The engine and its conventions: aligner/pairwise/engine.py.  Registered in aligner/cli/.
"""
from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import click

CHUNK_PAIRS = 1 << 20           # pairs per alignment call: parsing, aligning and writing of chunks overlap


def _chunks(qpath: str, tpath: str, chunk: int):
    """(query batch, target batch) of up to `chunk` pairs, the two files read in lockstep (each parsed in a
    thread of its own, aligner/io/reads.py: FASTA or FASTQ, plain or gzip); a ReadFormatError when they differ
    in record count."""
    from g3align.aligner.io.reads import ReadBatch, ReadFormatError, display_path, iter_pieces, prefetch

    its = [prefetch(iter_pieces(p, trim_readno=False, keep_raw=False), name="g3align-reader") for p in (qpath, tpath)]
    bufs: list[list] = [[], []]
    have = [0, 0]
    done = [False, False]
    n_pairs = 0
    while True:
        for s in (0, 1):
            while not done[s] and have[s] < chunk:
                b = next(its[s], None)
                if b is None:
                    done[s] = True
                elif b.n:
                    bufs[s].append(b)
                    have[s] += b.n
        k = min(have[0], have[1], chunk)
        if done[0] and done[1] and have[0] != have[1] or k == 0 and have[0] + have[1]:
            short, other = (qpath, tpath) if have[0] < have[1] else (tpath, qpath)
            raise ReadFormatError(f"{display_path(short)}: ends after record {n_pairs + min(have)} while "
                                  f"{display_path(other)} has more records (the files must hold an equal number of "
                                  "records: pairs are taken by order)")
        if k == 0:
            return
        out = []
        for s in (0, 1):
            cat = ReadBatch.concat(bufs[s])
            out.append(cat.slice(0, k))
            bufs[s] = [cat.slice(k, cat.n)] if cat.n > k else []
            have[s] -= k
        n_pairs += k
        yield out[0], out[1]


def _tsv(qb, tb, r, traceback: bool) -> bytes:
    from g3align.aligner.pairwise.pwio import format_tsv

    qnb, qno = qb.name_csr()
    tnb, tno = tb.name_csr()
    return format_tsv(qnb, qno, tnb, tno, qb.lengths, tb.lengths, r.score, r.q_start, r.q_end, r.t_start,
                      r.t_end, r.cigar, r.cigar_off, traceback)


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
    """Align query k against target k for every k (FASTA or FASTQ, pairs by order) and write a TSV."""
    if output is None and sys.stdout is None:
        raise click.ClickException("cannot write to standard output: it is closed (give -o FILE)")
    try:
        from g3align import jit
        jit.note_expect("the pairwise kernels", "1")
        from g3align.aligner.cli.startup import gpu_machine
        jit.precompile(f"align-{'gpu' if gpu_machine(device) else 'cpu'}")
        from g3align.aligner.pairwise.engine import align_pairs  # here: `g3align mem` / `map` need not import it
        try:
            out = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 (closed below)
        except OSError as e:
            raise click.ClickException(f"{output}: {e.strerror or e}")
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="g3align-writer") as writer:
                out.write(b"#qname\tqlen\tq_start\tq_end\ttname\ttlen\tt_start\tt_end\tscore\tcigar\n")
                pending = None
                for qb, tb in _chunks(queries, targets, CHUNK_PAIRS):
                    r = align_pairs((qb.seq, qb.seq_off), (tb.seq, tb.seq_off), mode=mode, match=match,
                                    mismatch=mismatch, gap_open=gap_open, gap_extend=gap_extend, traceback=traceback,
                                    band=band, device=device)
                    if pending is not None:
                        pending.result()
                    pending = writer.submit(lambda qb=qb, tb=tb, r=r: out.write(_tsv(qb, tb, r, traceback)))
                if pending is not None:
                    pending.result()
        finally:
            if output:
                out.close()
            else:
                out.flush()
    except (ValueError, RuntimeError, NotImplementedError) as e:    # (a ReadFormatError is a ValueError)
        raise click.ClickException(str(e))
    except BrokenPipeError:     # the reader of our output left (e.g. `| head`): quietly, as mem does
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as e:
        raise click.ClickException(f"{e.filename or output or 'standard output'}: {e.strerror or e}")
