"""End-to-end tests of `g3align map` against minimap2 2.24 (golden files in data/, live minimap2 when present)."""
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from g3align.aligner.io.compare import compare_sam

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
REF = DATA / "lambda.fa.gz"
READS = DATA / "lambda_pbsim.fq.gz"
G3 = [sys.executable, "-m", "g3align.aligner.cli"]


def g3map(args, **kw):
    return subprocess.run(G3 + ["map"] + [str(a) for a in args], capture_output=True, **kw)


def test_paf_identical_to_minimap2_golden(tmp_path):
    r = g3map(["-t2", "-x", "map-pb", REF, READS])
    assert r.returncode == 0, r.stderr.decode()
    gold = gzip.decompress((DATA / "golden" / "lambda_pbsim.mm2.paf.gz").read_bytes())
    assert r.stdout == gold


def test_output_independent_of_threads_and_batch(tmp_path):
    outs = set()
    for args in (["-t1"], ["-t2", "-K", "20k"], ["-t3", "-K", "1"]):
        r = g3map(args + ["-x", "map-pb", REF, READS])
        assert r.returncode == 0, r.stderr.decode()
        outs.add(r.stdout)
    assert len(outs) == 1


def test_stage_times_line(tmp_path):
    """G3ALIGN_STAGES=1: one stderr line with the wall time of every stage, start-up to output; SAM unchanged (the CPU
    path's stages, also on a GPU box)."""
    plain = g3map(["-t2", "--device", "cpu", "-ax", "map-pb", REF, READS])
    r = g3map(["-t2", "--device", "cpu", "-ax", "map-pb", REF, READS], env=dict(os.environ, G3ALIGN_STAGES="1"))
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == plain.stdout
    line = [ln for ln in r.stderr.decode().splitlines() if ln.startswith("[M::stages]")]
    assert len(line) == 1
    for stage in ("start-up (interpreter, imports)", "index (load or build on a thread: the wait; mid_occ)", "reading",
                  "chaining+alignment+text (CPU threads)", "output"):
        assert f"{stage} " in line[0]


def test_trace_file(tmp_path):
    """G3ALIGN_TRACE=FILE: JSON [stage, thread, t0, t1] of the start-up steps, the reader's items and every stage lap
    of every part thread (as mem writes it; scripts/gpu_cli_profile.py reads that shape); SAM unchanged."""
    import json
    plain = g3map(["-t2", "--device", "cpu", "-ax", "map-pb", REF, READS])
    tr = tmp_path / "trace.json"
    r = g3map(["-t2", "--device", "cpu", "-ax", "map-pb", REF, READS], env=dict(os.environ, G3ALIGN_TRACE=str(tr)))
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == plain.stdout
    ev = json.loads(tr.read_text())
    stages = {e[0] for e in ev}
    for stage in ("start-up: interpreter, cli import", "start-up: index", "start-up: device", "next item",
                  "chaining+alignment+text (CPU threads)", "output", "mapping, all parts (wall)"):
        assert stage in stages, stage
    assert all(len(e) == 4 and 0 <= e[2] <= e[3] for e in ev)
    assert any(e[1].startswith("g3align-part") for e in ev)


def test_saved_index_gives_the_same_output(tmp_path):
    idx = tmp_path / "lam.g3m"
    r = g3map(["-x", "map-pb", "-d", idx, REF])
    assert r.returncode == 0 and idx.exists(), r.stderr.decode()
    r1 = g3map(["-x", "map-pb", idx, READS])
    r2 = g3map(["-x", "map-pb", REF, READS])
    assert r1.returncode == 0 and r1.stdout == r2.stdout


@pytest.mark.parametrize("args,msg", [
    (["-x", "nope", "REF", "READS"], "unknown preset"),
    (["REF", "missing.fq"], "fail to open file"),
    (["-k", "40", "REF", "READS"], "no larger than 28"),
    (["-a", "--qstrand", "REF", "READS"], "--qstrand doesn't work with -a, -H, --frag or --splice"),
    (["-x", "sr", "--qstrand", "REF", "READS"], "--qstrand doesn't work with -a, -H, --frag or --splice"),
    (["-x", "map-pb", "--qstrand", "REF", "READS"], "--qstrand doesn't work with -a, -H, --frag or --splice"),
])
def test_bad_input_one_line_error(args, msg):
    args = [REF if a == "REF" else READS if a == "READS" else a for a in args]
    r = g3map(args)
    # (a first run on an empty kernel cache may also print its one compile note)
    err = [ln for ln in r.stderr.decode().strip().splitlines() if not ln.startswith("[M::g3align] compiling")]
    assert r.returncode == 1 and len(err) == 1 and msg in err[0] and "Traceback" not in r.stderr.decode()


def test_bad_reads_file_names_record(tmp_path):
    bad = tmp_path / "bad.fq"
    bad.write_text("@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nII\n")
    r = g3map([REF, bad])
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 1 and "bad.fq" in err[-1] and "record 2" in err[-1]
    assert "Traceback" not in r.stderr.decode()


def test_empty_and_short_reads(tmp_path):
    fq = tmp_path / "short.fq"
    fq.write_text("@empty\n\n+\n\n@tiny\nACG\n+\nIII\n@n\nNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN\n+\n"
                  "IIIIIIIIIIIIIIIIIIIIIIIIIIIIIIIII\n")
    r = g3map(["--paf-no-hit", REF, fq])
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert [ln.split("\t")[0] for ln in lines] == ["empty", "tiny", "n"]
    assert all(ln.split("\t")[4] == "*" for ln in lines)


@pytest.mark.skipif(shutil.which("minimap2") is None, reason="minimap2 not installed")
def test_paf_many_contigs_vs_live_minimap2(tmp_path):
    """A reference of many short contigs (lambda cut in 2 kb pieces) and reads spanning them."""
    import numpy as np
    seq = "".join(ln.strip() for ln in gzip.open(REF, "rt") if not ln.startswith(">"))
    ref = tmp_path / "pieces.fa"
    with open(ref, "w") as fh:
        for i in range(0, len(seq), 2000):
            fh.write(f">c{i // 2000}\n{seq[i:i + 2000]}\n")
    rng = np.random.default_rng(5)
    fq = tmp_path / "r.fq"
    with open(fq, "w") as fh:
        for i in range(60):
            p, ln = int(rng.integers(0, len(seq) - 3000)), int(rng.integers(300, 3000))
            s = list(seq[p:p + ln])
            for _ in range(ln // 30):
                s[int(rng.integers(0, ln))] = "ACGT"[int(rng.integers(0, 4))]
            fh.write(f"@q{i}\n{''.join(s)}\n+\n{'I' * ln}\n")
    gold = subprocess.run(["minimap2", "-x", "map-ont", str(ref), str(fq)], capture_output=True, check=True).stdout
    r = g3map(["-x", "map-ont", ref, fq])
    assert r.returncode == 0, r.stderr.decode()
    (tmp_path / "t.paf").write_bytes(r.stdout)
    (tmp_path / "g.paf").write_bytes(gold)
    res = compare_sam(str(tmp_path / "t.paf"), str(tmp_path / "g.paf"), tags=("tp", "cm", "s1", "s2", "dv", "rl"))
    assert res["identical"] == res["common"] == 60


@pytest.mark.skipif(shutil.which("minimap2") is None, reason="minimap2 not installed")
@pytest.mark.parametrize("args", [["-x", "map-ont"], ["-cx", "map-ont", "--cs"], ["-cx", "map-ont", "--cs=long"],
                                  ["-cx", "map-ont", "--MD", "--eqx"]])
def test_qstrand_paf_identical_to_live_minimap2(args):
    """--qstrand (the query kept on its strand: reverse hits' target coordinates from the contig's end, cs/MD
    against the reverse-complemented target), PAF byte for byte as minimap2 2.24's, on the CPU and on the GPU."""
    gold = subprocess.run(["minimap2", *args, "--qstrand", str(REF), str(READS)], capture_output=True,
                          check=True).stdout
    assert b"\t-\t" in gold and b"\t+\t" in gold
    devices = ["cpu"]
    from g3align.aligner.gpu.device import gpu_available
    if gpu_available():
        devices.append("gpu")
    for dev in devices:
        r = g3map([*args, "--qstrand", "--device", dev, REF, READS])
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout == gold, dev


def test_index_x_builds_minimizer_index_found_by_prefix(tmp_path):
    pre = tmp_path / "lam"
    r = subprocess.run(G3 + ["index", "--no-fm", "-x", "map-pb,map-ont", "-p", str(pre), str(REF)],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "lam.k19w10hb14.g3m").exists() and (tmp_path / "lam.k15w10b14.g3m").exists()
    r = g3map(["-x", "map-pb", pre, READS])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == gzip.decompress((DATA / "golden" / "lambda_pbsim.mm2.paf.gz").read_bytes())
    r = g3map(["-x", "map-hifi", pre, READS])           # no index for this preset's k/w
    assert r.returncode == 1 and "fail to open file" in r.stderr.decode()


def _records(b: bytes) -> list[bytes]:
    return [ln for ln in b.splitlines() if not ln.startswith(b"@")]


def test_sam_and_paf_with_cigar_identical_to_minimap2_golden():
    r = g3map(["-t2", "-ax", "map-pb", REF, READS])
    assert r.returncode == 0, r.stderr.decode()
    gold = gzip.decompress((DATA / "golden" / "lambda_pbsim.mm2.sam.gz").read_bytes())
    assert _records(r.stdout) == _records(gold)
    hdr = [ln for ln in r.stdout.splitlines() if ln.startswith(b"@SQ")]
    assert hdr == [ln for ln in gold.splitlines() if ln.startswith(b"@SQ")]
    r = g3map(["-cx", "map-pb", REF, READS])
    assert r.stdout == gzip.decompress((DATA / "golden" / "lambda_pbsim.mm2c.paf.gz").read_bytes())


def test_sam_independent_of_threads_and_batch_and_bam(tmp_path):
    outs = set()
    for args in (["-t1"], ["-t3", "-K", "5k"]):
        r = g3map(args + ["-ax", "map-pb", "--cs", "--MD", REF, READS])
        assert r.returncode == 0, r.stderr.decode()
        outs.add(b"\n".join(_records(r.stdout)))
    assert len(outs) == 1
    import pysam
    bam = tmp_path / "o.bam"
    r = g3map(["-ax", "map-pb", "-o", bam, REF, READS])
    assert r.returncode == 0, r.stderr.decode()
    with pysam.AlignmentFile(str(bam)) as f:
        names = [a.query_name for a in f if not a.is_secondary and not a.is_supplementary]
    assert len(names) == len(set(names)) == 52           # every read exactly once as primary/unmapped


@pytest.mark.skipif(shutil.which("picard") is None and shutil.which("PicardCommandLine") is None,
                    reason="picard not installed")
def test_picard_validates_sam(tmp_path):
    sam = tmp_path / "o.sam"
    r = g3map(["-ax", "map-pb", "-R", "@RG\\tID:x\\tSM:y\\tPL:PACBIO", "-o", sam, REF, READS])
    assert r.returncode == 0, r.stderr.decode()
    exe = shutil.which("picard") or shutil.which("PicardCommandLine")
    v = subprocess.run([exe, "ValidateSamFile", f"I={sam}", "MODE=SUMMARY"], capture_output=True, text=True)
    assert "No errors found" in v.stdout + v.stderr, v.stdout + v.stderr


# ---- batch seeding (the GPU path's seeds, here through their CPU twins; on a GPU box also the GPU) ----

def _map_outputs(ref, reads, preset_args, devices):
    from g3align.aligner.io.reads import read_batches
    from g3align.aligner.map import options as MO
    from g3align.aligner.map.pipeline import MapAligner
    from g3align.index import mmidx
    opt, _, _ = MO.parse_map_args(preset_args + [str(ref), str(reads)])
    idx = mmidx.build_mm_index(mmidx.read_mm_ref(str(ref)), opt.k, opt.w, opt.is_hpc, opt.bucket_bits)
    MO.update_mid_occ(opt, idx.cal_max_occ)
    outs = []
    for device, batch_seed, *more in devices:  # more: batch_chain, batch_align (None: the default)
        more = list(more) + [None] * (2 - len(more))
        al = MapAligner(idx, opt, device=device, batch_seed=batch_seed, batch_chain=more[0], batch_align=more[1])
        outs.append(b"".join(al.map_batch(bt, 2) for bt in read_batches(str(reads), chunk_size=20_000,
                                                                          trim_readno=False)))
    return outs


@pytest.mark.parametrize("preset", [["-x", "map-pb", "-a"], ["-x", "map-ont", "-c"], ["-x", "map-hifi"],
                                    ["-x", "sr", "-a"]])
def test_batch_seeding_gives_the_same_output(preset):
    """Batch seeding with and without the batch DP chaining scores (lchain_gpu's twin) and the staged base
    alignment (aligner/map/align_batch.py, ksw2_gpu's twin) == per-read mapping."""
    outs = _map_outputs(REF, READS, preset, [("cpu", False), ("cpu", True), ("cpu", True, None, True),
                                             ("cpu", True, False, True)])
    assert outs[0] and all(o == outs[0] for o in outs[1:])


SHARED = ROOT.parent / "shared" / "data"


@pytest.mark.skipif(not (SHARED / "reads" / "ecoli_K12_ont_R9_nanoget.fastq.gz").exists(), reason="no shared data")
def test_batch_seeding_ecoli_ont(tmp_path):
    reads = tmp_path / "ont.fq"
    with gzip.open(SHARED / "reads" / "ecoli_K12_ont_R9_nanoget.fastq.gz", "rt") as fh:
        reads.write_text("".join(line for _, line in zip(range(4 * 12), fh)))
    per_read, batched, staged = _map_outputs(SHARED / "ref" / "ecoli_K12_MG1655.fa.gz", reads,
                                             ["-x", "map-ont", "-c"], [("cpu", False), ("cpu", True),
                                                                       ("cpu", True, None, True)])
    assert per_read.count(b"\n") >= 8 and per_read == batched and per_read == staged


@pytest.mark.skipif(not (SHARED / "reads" / "ecoli_K12_pacbio_RSII_first3000.fastq.gz").exists(),
                    reason="no shared data")
def test_staged_alignment_ecoli_pacbio(tmp_path):
    """The staged base alignment (plan, batch of ksw2 jobs on the twin, replay) on 300 real RS II reads, SAM
    with --cs and --MD: == the per-read path."""
    reads = tmp_path / "pb.fq"
    with gzip.open(SHARED / "reads" / "ecoli_K12_pacbio_RSII_first3000.fastq.gz", "rt") as fh:
        reads.write_text("".join(line for _, line in zip(range(4 * 300), fh)))
    per_read, staged = _map_outputs(SHARED / "ref" / "ecoli_K12_MG1655.fa.gz", reads,
                                    ["-ax", "map-pb", "--cs", "--MD"], [("cpu", False), ("cpu", True, None, True)])
    assert per_read.count(b"\n") >= 300 and per_read == staged


def _gpu():
    from g3align.aligner.gpu.device import gpu_available
    return gpu_available()


@pytest.mark.gpu
@pytest.mark.parametrize("preset", [["-x", "map-pb", "-a"], ["-x", "map-ont", "-c"], ["-x", "sr", "-a"]])
def test_gpu_seeding_gives_the_same_output(preset):
    """--device gpu with the base alignment per read on CPU threads (--cpu-align) and on the GPU
    (kernels/ksw2.cu, the default there) == per-read CPU output."""
    per_read, gpu, gpu_align, default = _map_outputs(REF, READS, preset, [("cpu", False), ("gpu", None, None, False),
                                                                          ("gpu", None, None, True), ("gpu", None)])
    assert per_read and per_read == gpu and per_read == gpu_align and per_read == default


class _Sink:
    def __init__(self):
        self.chunks = []

    def write(self, b):
        self.chunks.append(bytes(b))


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_part_pipeline_does_not_change_the_output(device, monkeypatch):
    """run_map over reads.read_batch_parts: parts of any size, mapped up to MAP_DEPTH at once (worker threads,
    their own CUDA streams on the GPU; MAP_QUEUED more handed over ahead), give the records of one batch mapped per
    read, in input order."""
    from g3align.aligner.io.reads import read_batch_parts, read_batches
    from g3align.aligner.map import options as MO
    from g3align.aligner.map import pipeline as MP
    from g3align.index import mmidx
    opt, _, _ = MO.parse_map_args(["-ax", "map-pb", "-t", "3", str(REF), str(READS)])
    idx = mmidx.build_mm_index(mmidx.read_mm_ref(str(REF)), opt.k, opt.w, opt.is_hpc, opt.bucket_bits)
    MO.update_mid_occ(opt, idx.cal_max_occ)
    ref_out = b"".join(MP.MapAligner(idx, opt, device="cpu").map_batch(bt, 1)
                       for bt in read_batches(str(READS), chunk_size=1 << 30, trim_readno=False))
    assert ref_out.count(b"\n") >= 52
    from g3align.aligner.map import align_batch as mmext
    # at_once: the GPU's ksw2 batches 1, 2 or any number at once (each from its launches on)
    for depth, queued, part_bases, chunk, at_once in (
            (1, 4, 1 << 30, 1 << 30, 0), (3, 4, 3_000, 1 << 30, 2), (2, 0, 5_000, 12_000, 0), (4, 4, 1, 1 << 30, 1),
            (2, 1, 2_000, 1 << 30, 0), (4, 4, 2_000, 1 << 30, 1), (3, 4, 3_000, 12_000, 1)):
        monkeypatch.setattr(mmext, "KSW2_AT_ONCE", at_once)
        monkeypatch.setattr(MP, "MAP_DEPTH", depth)
        monkeypatch.setattr(MP, "MAP_QUEUED", queued)
        al = MP.MapAligner(idx, opt, device=device, batch_seed=True, batch_align=True)
        sink = _Sink()
        n, _ = MP.run_map(al, read_batch_parts(str(READS), chunk_size=chunk, part_bases=part_bases, block_size=4096,
                                               trim_readno=False), sink, verbose=0)
        assert n == 52 and b"".join(sink.chunks) == ref_out, (depth, queued, part_bases, chunk, at_once)
        if part_bases < 10_000:
            assert len(sink.chunks) > 3  # really cut into parts


def _fifo_gate_run(width: int):
    """Six threads through a FifoGate(width), each taking its ticket before the next starts: (how many had gone
    out when each got in, the most inside at once)."""
    import threading
    import time

    from g3align.aligner.map.align_batch import FifoGate
    gate, lock = FifoGate(width), threading.Lock()
    inside, most, gone, gone_at_entry = [0], [0], [0], {}

    def holder(i):
        with gate:
            with lock:
                gone_at_entry[i] = gone[0]
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1
                gone[0] += 1

    threads = []
    for i in range(6):
        threads.append(threading.Thread(target=holder, args=(i,)))
        threads[-1].start()
        while gate._issued <= i:  # holder i has taken its ticket before i + 1 starts
            time.sleep(0.001)
    for th in threads:
        th.join()
    return gone_at_entry, most[0]


def test_fifo_gate_admits_in_arrival_order():
    """mmext.FifoGate (KSW2_AT_ONCE): never more than `width` holders, let in in the order they arrived: holder i
    gets in only once all but width - 1 of those before it have gone out."""
    for width in (1, 2):
        gone_at_entry, most = _fifo_gate_run(width)
        assert all(gone_at_entry[i] >= i - width + 1 for i in range(6)) and most == width, gone_at_entry


def test_map_tune_cli():
    """G3ALIGN_TUNE applies to the map pipeline's constants: tiny parts, one or four at once, same SAM; an
    unknown name is a one-line error."""
    outs = set()
    for tune in ("MAP_DEPTH=1", "MAP_PART_BASES=2000,MAP_DEPTH=4", "MAP_PART_BASES=2000,MAP_QUEUED=0",
                 "MAP_PART_BASES=3000,KSW2_AT_ONCE=0", "MAP_PART_BASES=3000,KSW2_AT_ONCE=2",
                 "MAP_READ_AHEAD=1,MAP_PART_BASES=3000", "SCAN_PIECE=700"):
        r = g3map(["-ax", "map-pb", "-t", "2", REF, READS], env={**os.environ, "G3ALIGN_TUNE": tune})
        assert r.returncode == 0, r.stderr.decode()
        outs.add(b"\n".join(_records(r.stdout)))
    assert len(outs) == 1
    r = g3map(["-ax", "map-pb", REF, READS], env={**os.environ, "G3ALIGN_TUNE": "NO_SUCH=1"})
    assert r.returncode != 0 and b"Traceback" not in r.stderr and b"NO_SUCH" in r.stderr


def test_gpu_align_is_the_gpu_default():
    """MapAligner: staged base alignment with device gpu unless --cpu-align; with the CPU only on --gpu-align."""
    from g3align.aligner.map import options as MO
    from g3align.aligner.map.pipeline import MapAligner
    from g3align.index import mmidx
    idx = mmidx.build_mm_index(mmidx.read_mm_ref(str(REF)), 19, 10, True, 14)
    for extra, dev, staged in (([], "gpu", True), (["--cpu-align"], "gpu", False), (["--gpu-align"], "gpu", True),
                               ([], "cpu", False), (["--gpu-align"], "cpu", False)):
        opt, _, _ = MO.parse_map_args(["-ax", "map-pb"] + extra + [str(REF), str(READS)])
        MO.update_mid_occ(opt, idx.cal_max_occ)
        al = MapAligner(idx, opt, device=dev)  # no GPU needed: its CUDA state is made on first use
        assert al.batch_align is staged, (extra, dev)
    opt, _, _ = MO.parse_map_args(["-ax", "map-pb", "--gpu-align", str(REF), str(READS)])
    assert MapAligner(idx, opt, device="cpu", batch_seed=True).batch_align is True


@pytest.mark.skipif(_gpu(), reason="a CUDA device is visible")
def test_device_auto_without_gpu_notes_cpu():
    """--device auto with no GPU: one note on stderr, the CPU output; --device gpu: a one-line error."""
    r = g3map(["--device", "auto", "-ax", "map-pb", REF, READS])
    assert r.returncode == 0 and b"[M::map] no GPU found; running on the CPU" in r.stderr
    r = g3map(["--device", "gpu", "-ax", "map-pb", REF, READS])
    err = [ln for ln in r.stderr.splitlines() if ln.startswith(b"[E::")]
    assert r.returncode != 0 and b"Traceback" not in r.stderr and len(err) == 1 and b"--device gpu" in err[0]


def test_u_to_t_copies_only_rna_reads():
    """U/u print as T/t (as minimap2 does); reads without U are passed through without a copy."""
    import numpy as np

    from g3align.aligner.map.pipeline import _u_to_t
    dna = np.frombuffer(b"ACGTNacgtn", np.uint8)
    assert _u_to_t(dna) is dna
    rna = np.frombuffer(b"ACGUuNacg", np.uint8)
    out = _u_to_t(rna)
    assert out.tobytes() == b"ACGTtNacg" and rna.tobytes() == b"ACGUuNacg"
    assert _u_to_t(np.zeros(0, np.uint8)).shape == (0,)


@pytest.mark.gpu
def test_gpu_map_does_not_import_cupyx(tmp_path):
    """CuPy imports cupyx.scipy.special (and cupyx's sparse modules) at the first NumPy-ufunc override, i.e. the first
    operator between a CuPy array and a Python number (`a > 0`, `a * 2`): 0.27-0.46 s in the first part's seeding
    on the GPU box. `map --device gpu` avoids it."""
    from conftest import run_spying_cupyx
    r = run_spying_cupyx("from g3align.aligner.cli.map import _run_map\n"
                         f"_run_map(['-ax', 'map-pb', '--device', 'gpu', '-o', {str(tmp_path / 'o.sam')!r}, "
                         f"{str(REF)!r}, {str(READS)!r}])")
    assert r.returncode == 0, r.stderr
    assert "cupyx.scipy imported: False" in r.stdout, r.stdout  # (`import cupy` itself makes a bare 'cupyx')
    assert (tmp_path / "o.sam").stat().st_size > 0


@pytest.mark.gpu
def test_worker_streams():
    """A part worker's streams (MapAligner.worker_init): its own stream is current (not CuPy's null stream) and has
    a higher priority than its ksw2 stream, and pinned.on_stream switches to the ksw2 stream and back to the one
    current before."""
    import threading
    import types

    import cupy as cp

    from g3align.aligner.gpu.pinned import on_stream
    from g3align.aligner.map import pipeline as MP
    got = {}

    def worker():
        MP.MapAligner.worker_init(types.SimpleNamespace(device="gpu", batch_seed=True, batch_align=True))
        rt = cp.cuda.runtime
        got["current"] = cur = cp.cuda.get_current_stream().ptr
        got["own"] = MP._WORKER.stream.ptr
        got["prio"] = rt.streamGetPriority(MP._WORKER.stream.ptr)
        k = getattr(MP._WORKER, "ksw2_stream", None)
        got["ksw2"] = None if k is None else rt.streamGetPriority(k.ptr)
        if k is not None:
            with on_stream(k):
                got["in_ksw2"] = cp.cuda.get_current_stream().ptr == k.ptr
            got["back"] = cp.cuda.get_current_stream().ptr == cur

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert got["current"] == got["own"] != 0
    assert got["ksw2"] is not None and got["prio"] < got["ksw2"] and got["in_ksw2"] and got["back"]


def _rc(s: str) -> str:
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


def _paired_sr_inputs(d: Path):
    """A reference where mates pair, go unpaired and repeat: lambda as two contigs plus a 1.5 kb copy of a piece of
    it; the demo pairs and made ones: mates on different contigs, a mate of random sequence, mates reading through
    each other (fragment as long as a read), pairs inside the repeat (pairing broken by the hash), a pair whose
    second mate is named differently (two single reads to minimap2)."""
    import random
    rnd = random.Random(11)
    lam = "".join(gzip.decompress(REF.read_bytes()).decode().split("\n")[1:])
    half = len(lam) // 2
    rep = lam[5000:6500]
    ctgs = [("lamA", lam[:half]), ("lamB", lam[half:]), ("rep", "".join(rnd.choice("ACGT") for _ in range(3000))
                                                          + rep + "".join(rnd.choice("ACGT") for _ in range(3000)))]
    ref = d / "ref.fa"
    ref.write_text("".join(f">{n}\n{s}\n" for n, s in ctgs))
    r1 = gzip.decompress((DATA / "lambda_R1.fq.gz").read_bytes()).decode().split("\n")[:2400]
    r2 = gzip.decompress((DATA / "lambda_R2.fq.gz").read_bytes()).decode().split("\n")[:2400]
    pairs = [(r1[i:i + 4], r2[i:i + 4]) for i in range(0, len(r1), 4)]

    def rec(name, s):
        return [f"@{name}", s, "+", "".join(rnd.choice("5?I") for _ in s)]

    def mut(s):
        return "".join(c if rnd.random() > 0.01 else rnd.choice("ACGT") for c in s)
    for k in range(40):
        kind = k % 5
        p = rnd.randrange(0, half - 700)
        if kind == 0:  # mates on the two contigs
            a, b = mut(lam[p:p + 150]), _rc(mut(lam[half + p:half + p + 150]))
        elif kind == 1:  # second mate random
            a, b = mut(lam[p:p + 150]), "".join(rnd.choice("ACGT") for _ in range(150))
        elif kind == 2:  # read-through: a 150 bp fragment read from both ends
            a = mut(lam[p:p + 150])
            b = _rc(a)
        elif kind == 3:  # inside the repeat
            q = 5000 + rnd.randrange(0, 1500 - 450)
            a, b = mut(lam[q:q + 150]), _rc(mut(lam[q + 300:q + 450]))
        else:  # a normal pair
            a, b = mut(lam[p:p + 150]), _rc(mut(lam[p + 250:p + 400]))
        pairs.append((rec(f"made{k}/1", a), rec(f"made{k}/2" if k != 7 else f"odd{k}/2", b)))
    f1, f2, fi = d / "r1.fq", d / "r2.fq", d / "inter.fq"
    f1.write_text("".join("\n".join(a) + "\n" for a, _ in pairs))
    f2.write_text("".join("\n".join(b) + "\n" for _, b in pairs))
    fi.write_text("".join("\n".join(a) + "\n" + "\n".join(b) + "\n" for a, b in pairs))
    return ref, f1, f2, fi


@pytest.mark.skipif(shutil.which("minimap2") is None, reason="minimap2 not installed")
@pytest.mark.parametrize("mode", ["two-files", "interleaved", "no-pairing", "frag-map-ont"])
def test_paired_fragments_identical_to_minimap2(tmp_path, mode):
    """Fragment mode: -x sr on two files (mates in lockstep) or on one file of neighbouring mates, --no-pairing, and
    --frag=yes with another preset: every record identical to minimap2 2.24 (pair flags, mate fields, TLEN, MAPQ
    raised by pairing), also at -t 2 with small batches (-K) that cut the input between fragments."""
    ref, f1, f2, fi = _paired_sr_inputs(tmp_path)
    args = {"two-files": (["-ax", "sr"], [f1, f2]), "interleaved": (["-ax", "sr"], [fi]),
            "no-pairing": (["-ax", "sr", "--no-pairing"], [f1, f2]),
            "frag-map-ont": (["-ax", "map-ont", "--frag=yes"], [f1, f2])}[mode]
    mm = subprocess.run(["minimap2", *args[0], str(ref), *map(str, args[1])], capture_output=True, check=True).stdout
    body = [ln for ln in mm.split(b"\n") if ln and not ln.startswith(b"@")]
    flags = [int(ln.split(b"\t")[1]) for ln in body]
    assert sum(f & 1 for f in flags) > 900  # mates written as segments of a fragment
    proper = sum(1 for f in flags if f & 0x2)
    # FR pairs: proper with -x sr; never with --no-pairing; map-ont's --frag=yes expects FF mates (pe_ori 0)
    assert proper > 400 if mode in ("two-files", "interleaved") else proper < 50
    for extra in ([], ["-t", "2", "-K", "7k"]):
        r = g3map(args[0] + extra + [ref, *args[1]])
        assert r.returncode == 0, r.stderr.decode()
        ours = [ln for ln in r.stdout.split(b"\n") if ln and not ln.startswith(b"@")]
        assert ours == body


@pytest.mark.parametrize("extra", [[], ["--MD", "--cs"], ["--frag=yes", "-x", "map-ont", "-a"]])
def test_staged_fragments_equal_per_fragment_mapping(tmp_path, extra):
    """Fragment mode (-x sr pairs from two files, mates in lockstep): the staged path (map_frag_plan, the ksw2 jobs
    on the CPU twin, map_frag_finish) writes the records map_frag_range writes; with some mates renamed, parts mix
    fragments of one read and of two."""
    from g3align.aligner.io.reads import read_pair_batch_parts
    from g3align.aligner.map import options as MO
    from g3align.aligner.map.pipeline import MapAligner
    from g3align.index import mmidx
    r1, r2 = ROOT / "data" / "lambda_R1.fq.gz", ROOT / "data" / "lambda_R2.fq.gz"
    lines = gzip.decompress(r2.read_bytes()).decode().splitlines(keepends=True)
    for i in range(0, len(lines), 40):  # every tenth mate renamed: its fragment splits in two of one read each
        lines[i] = "@x" + lines[i][1:]
    r2x = tmp_path / "r2.fq"
    r2x.write_text("".join(lines))
    args = (["-ax", "sr"] if not extra or extra[0].startswith("--M") else []) + extra
    opt, _, _ = MO.parse_map_args(args + [str(REF), str(r1), str(r2x)])
    assert opt.flag & MO.F_FRAG_MODE
    idx = mmidx.build_mm_index(mmidx.read_mm_ref(str(REF)), opt.k, opt.w, opt.is_hpc, opt.bucket_bits)
    MO.update_mid_occ(opt, idx.cal_max_occ)
    outs = []
    for staged in (False, True):
        al = MapAligner(idx, opt, device="cpu", batch_seed=staged, batch_align=staged, stage_frags=staged)
        assert al.stage_frags is staged
        outs.append(b"".join(al.map_batch(part, 2) for part, _ in read_pair_batch_parts(
            str(r1), str(r2x), chunk_size=50_000, part_bases=20_000, trim_readno=False, check_names=False)))
    assert outs[0].count(b"\n") >= 3900 and outs[1] == outs[0]
