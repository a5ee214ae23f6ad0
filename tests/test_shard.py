"""`mem` over several workers (aligner/cli/shard.py): `--gpus N` (worker processes; here CPU workers, the same
code the GPU workers run) and `--scheduler ADDRESS` (a Dask LocalCluster of two worker processes).

Every run's output must equal the one-process run's byte for byte with the same -K (the demo pairs cut into ~10
batches), also when a worker fails at start or dies mid-run (its batches redone by the others, nothing written
twice or lost)."""
import os
import time

import pytest
from test_mem import g3  # the CLI in a subprocess (pytest puts tests/ on sys.path)

from g3align.aligner.cli import common as cli_common
from g3align.aligner.cli import map as map_cli
from g3align.aligner.cli import mem as mem_cli
from g3align.aligner.cli import shard

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
R1, R2 = os.path.join(DATA, "lambda_R1.fq.gz"), os.path.join(DATA, "lambda_R2.fq.gz")
K = "60000"  # bases per batch: the demo's 2,000 pairs of 2x150 in 10 batches


@pytest.fixture(scope="module")
def lam(tmp_path_factory):
    d = tmp_path_factory.mktemp("shard")
    prefix = str(d / "lambda")
    g3("index", "-p", prefix, os.path.join(DATA, "lambda.fa.gz"))
    pe = g3("mem", "-t", "2", "-K", K, prefix, R1, R2).stdout
    se = g3("mem", "-t", "2", "-K", K, prefix, R1).stdout
    return prefix, pe, se


def body(sam: bytes) -> bytes:
    """The records (the @PG line holds the command line)."""
    return b"".join(ln for ln in sam.splitlines(keepends=True) if not ln.startswith(b"@PG"))


def run_workers(tmp_path, prefix, reads, gpus, capfd=None, **test):
    """The CLI's sharded path (aligner/cli/mem.py run_mem_sharded) with the given workers; returns the output bytes."""
    out = tmp_path / "out.sam"
    kw = mem_cli.mem_cmd.make_context("mem", ["-t", "2", "-K", K, "-o", str(out), prefix, *reads]).params
    paired = len(reads) == 2
    reader = mem_cli.start_reader(kw, int(K))
    try:
        mem_cli.run_mem_sharded(kw, reader, paired, False, gpus=gpus, test=test or None)
    finally:
        reader.close()
    return out.read_bytes()


def test_units_follow_batches():
    items = [("a", False), ("b", True), ("c", True), ("d", False), ("e", True)]
    assert [(u, f, la) for u, _, f, la in shard.units(items, True)] == [
        (0, True, False), (0, False, True), (1, True, True), (2, True, False), (2, False, True)]
    assert [u for u, *_ in shard.units("xyz", False)] == [0, 1, 2]


def test_two_workers_equal_one_process(lam, tmp_path):
    prefix, pe, se = lam
    assert body(run_workers(tmp_path, prefix, [R1, R2], [None, None])) == body(pe)
    assert body(run_workers(tmp_path, prefix, [R1], [None, None])) == body(se)


def test_worker_dies_mid_run(lam, tmp_path, capfd):
    prefix, pe, _ = lam
    marker = str(tmp_path / "died")
    got = run_workers(tmp_path, prefix, [R1, R2], [None, None], die_at=(3, marker))
    assert os.path.exists(marker)  # the worker did die at batch 3
    assert body(got) == body(pe)
    assert "failed (the process exited with status 3)" in capfd.readouterr().err


def test_worker_fails_at_start(lam, tmp_path, capfd):
    prefix, pe, _ = lam
    assert body(run_workers(tmp_path, prefix, [R1, R2], [None, None], fail_start=0)) == body(pe)
    assert "worker 0 (CPU) failed (RuntimeError: this worker was told to fail at start" in capfd.readouterr().err


def test_every_worker_fails(lam, tmp_path):
    prefix, _, _ = lam
    with pytest.raises(cli_common.G3Error, match="no worker started: worker 0"):
        run_workers(tmp_path, prefix, [R1, R2], [None], fail_start=0)


@pytest.mark.parametrize("args, msg", [
    (["--gpus", "2", "--device", "cpu"], "--gpus 2: not with --device cpu"),
    (["--gpus", "two"], "--gpus: expected a number or 'all', got 'two'"),
    (["--gpus", "0"], "--gpus: expected a number >= 1, got 0"),
])
def test_gpus_bad_values(lam, args, msg):
    p = g3("mem", *args, lam[0], R1, check=False)
    assert p.returncode != 0
    assert msg in p.stderr.decode()
    assert b"Traceback" not in p.stderr


def test_map_dump_with_workers(tmp_path):
    """map -d saves the index in the process that builds it: with workers, none would (an error, not ignored)."""
    p = g3("map", "-d", str(tmp_path / "x.g3m"), "--gpus", "2", os.path.join(DATA, "lambda.fa.gz"), R1,
           check=False)
    assert p.returncode != 0
    assert "-d: not with --gpus or --scheduler" in p.stderr.decode()
    assert b"Traceback" not in p.stderr
    assert not (tmp_path / "x.g3m").exists()


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as c:
        yield c,


def test_dask_cli_equals_one_process(lam, cluster, tmp_path):
    prefix, pe, se = lam
    addr = cluster[0].scheduler_address
    got = g3("mem", "-t", "2", "-K", K, "--scheduler", addr, prefix, R1, R2).stdout
    assert body(got) == body(pe)
    got = g3("mem", "-t", "2", "-K", K, "--scheduler", addr, prefix, R1).stdout
    assert body(got) == body(se)


def test_dask_worker_killed(lam, cluster, tmp_path):
    prefix, pe, _ = lam
    marker = str(tmp_path / "died")
    kw = mem_cli.mem_cmd.make_context("mem", ["-t", "2", "-K", K, "-o", str(tmp_path / "d.sam"), "--scheduler",
                                          cluster[0].scheduler_address, prefix, R1, R2]).params
    reader = mem_cli.start_reader(kw, int(K))
    try:
        mem_cli.run_mem_sharded(kw, reader, True, False, test={"die_at": (4, marker)})
    finally:
        reader.close()
    assert os.path.exists(marker)  # a worker process exited in the middle of batch 4
    assert body((tmp_path / "d.sam").read_bytes()) == body(pe)


def test_dask_bad_address(lam):
    pytest.importorskip("distributed")
    p = g3("mem", "--scheduler", "tcp://127.0.0.1:9", lam[0], R1, check=False)
    assert p.returncode != 0
    assert b"Traceback" not in p.stderr


@pytest.fixture(scope="module")
def lam_map():
    pb = os.path.join(DATA, "lambda_pbsim.fq.gz")
    ref = os.path.join(DATA, "lambda.fa.gz")
    return ref, pb, {
        "pb": g3("map", "-ax", "map-pb", "-t", "2", "-K", "20k", ref, pb).stdout,
        "sr": g3("map", "-ax", "sr", "-t", "2", "-K", "60k", ref, R1, R2).stdout}


def run_map_workers(tmp_path, args, gpus, **test):
    """The CLI's sharded map path (aligner/cli/map.py run_map_sharded) with the given workers; returns the output
    bytes."""
    from g3align.aligner.io import reads
    from g3align.aligner.io.reads import prefetch_now, read_batch_parts, read_pair_batch_parts
    from g3align.aligner.map import options as MO
    out = tmp_path / "map.sam"
    args = [*args[:-3], "-o", str(out), *args[-3:]] if args[1] == "sr" else [*args[:-2], "-o", str(out), *args[-2:]]
    opt, pos, _ = MO.parse_map_args(args)
    queries = pos[1:] if len(pos) == 2 else [tuple(pos[1:])]

    def reader(q):
        if isinstance(q, tuple):
            return prefetch_now(read_pair_batch_parts(*q, chunk_size=opt.mini_batch_size,
                                                      part_bases=reads.MAP_PART_BASES, trim_readno=False,
                                                      check_names=False), depth=2)
        return prefetch_now(read_batch_parts(q, chunk_size=opt.mini_batch_size, part_bases=reads.MAP_PART_BASES,
                                             trim_readno=False), depth=2)
    map_cli.run_map_sharded(args, opt, queries, pos[0], None, None, reader, gpus=gpus, test=test or None)
    return out.read_bytes()


def test_map_two_workers_equal_one_process(lam_map, tmp_path):
    ref, pb, want = lam_map
    got = run_map_workers(tmp_path, ["-ax", "map-pb", "-t", "2", "-K", "20k", ref, pb], [None, None])
    assert body(got) == body(want["pb"])
    got = run_map_workers(tmp_path, ["-ax", "sr", "-t", "2", "-K", "60k", ref, R1, R2], [None, None],
                          die_at=(2, str(tmp_path / "died")))
    assert os.path.exists(tmp_path / "died")
    assert body(got) == body(want["sr"])


def test_map_dask_cli(lam_map, cluster):
    ref, pb, want = lam_map
    got = g3("map", "-ax", "map-pb", "-t", "2", "-K", "20k", "--scheduler", cluster[0].scheduler_address, ref,
             pb).stdout
    assert body(got) == body(want["pb"])


def test_pipeline_hands_on_results_while_input_idles():
    """A worker's input arrives unit by unit, the next only after results went back: a None item (no input
    waiting) must let pipeline.ahead hand on what is done, with one thread and with several (the GPU path's 3)."""
    from g3align.aligner.mem.pipeline import ahead
    for workers in (1, 3):
        got = []

        def items(got=got):
            yield 1
            yield 2
            for _ in range(10_000):  # idle until both results are handed on (the parent's next unit)
                if len(got) == 2:
                    break
                time.sleep(0.001)
                yield None
            else:
                raise AssertionError("results held back while the input idles")
            yield 3

        for r in ahead(lambda x: x * 10, items(), workers=workers):
            got.append(r)
        assert got == [10, 20, 30]
