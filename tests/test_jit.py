"""g3align/jit.py: the per-user cache keyed by the source tree, call typing without literal specializations, the
compile note; an install laid out read-only reuses the cache (no compile in every process)."""
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g3align import jit

ROOT = Path(__file__).resolve().parent.parent


def test_cache_dir_is_per_user_and_keyed_by_the_tree(monkeypatch, tmp_path):
    monkeypatch.setenv("G3ALIGN_CACHE_DIR", str(tmp_path))
    assert jit.cache_root() == tmp_path
    assert jit.cache_dir() == tmp_path / "numba" / f"{jit.tree_hash()[:20]}-{jit.cpu_target()}"
    monkeypatch.delenv("G3ALIGN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jit.cache_root() == tmp_path / "xdg" / "g3align"
    names = {Path(d).name for d in jit._pkg_dirs()}
    assert {"aligner", "index", "mem", "map", "gpu"} <= names
    short = list(jit._pkg_dirs().values())  # each package's kernels in a folder of its own (two are named gpu)
    assert len(set(short)) == len(short) and {"aligner.mem.gpu", "aligner.map.gpu", "index"} <= set(short)


def test_tree_hash_follows_every_source_file(monkeypatch, tmp_path):
    """Same bytes anywhere -> same hash (a copy elsewhere shares the cache); an edit to any file -> a new hash."""
    dirs = {}
    for d, short in jit._pkg_dirs().items():
        dst = tmp_path / "a" / short
        dst.mkdir(parents=True)
        for p in Path(d).glob("*.py"):
            shutil.copy(p, dst / p.name)
        dirs[str(dst)] = short
    monkeypatch.setattr(jit, "_dirs", dirs)
    monkeypatch.setattr(jit, "_tree", None)
    h0 = jit.tree_hash()
    index = tmp_path / "a" / "index"
    os.utime(index / "fm.py", (0, 0))  # a new mtime alone changes nothing
    monkeypatch.setattr(jit, "_tree", None)
    assert jit.tree_hash() == h0
    (index / "fm.py").write_text((index / "fm.py").read_text() + "\n# an edit\n")
    monkeypatch.setattr(jit, "_tree", None)
    assert jit.tree_hash() != h0


def test_installed_layout_has_the_source_tree_hash(tmp_path):
    """pip installs aligner/, index/ and kernels/ inside g3align/ (pyproject's package-dir map): the same packages
    and sub-packages, by the same short names, so the same hash as the source tree (what lets a wheel's shipped
    kernels, made in its build directory, serve an install)."""
    site = tmp_path / "site"
    _install_copy(site)
    code = ("import json; from g3align import jit; "
            "print(json.dumps([sorted(jit._pkg_dirs().values()), jit.tree_hash(), jit.__file__]))")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(site)), cwd="/",
                       capture_output=True, text=True, check=True)
    names, tree, where = json.loads(r.stdout)
    assert where.startswith(str(site))
    assert names == sorted(jit._pkg_dirs().values()) and "aligner.mem.gpu" in names
    assert tree == jit.tree_hash()


def test_portable_target_where_asked_or_shipped():
    """G3ALIGN_CPU=portable compiles for x86-64-v3 (numba's cache key says so), so the cache can travel to any such
    machine; the default compiles for this CPU where the package ships no kernels; native undoes a portable choice
    inherited from a parent process."""
    code = ("from g3align import jit; jit._setup()\n"
            "from numba.core.registry import cpu_target\n"
            "print(jit.cpu_target(), cpu_target.target_context.codegen().magic_tuple()[1], jit.cache_dir().name)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU") and k != "G3ALIGN_CPU"}

    def ask(**kw):
        out = subprocess.run([sys.executable, "-c", code], env=dict(env, **kw), capture_output=True, text=True,
                             check=True)
        return out.stdout.split()

    name, magic, d = ask()
    assert name == "native" and magic != jit.PORTABLE and d.endswith("-native")
    if jit._host_has_portable():
        assert ask(G3ALIGN_CPU="portable") == [jit.PORTABLE, jit.PORTABLE, d.replace("-native", f"-{jit.PORTABLE}")]
    name, magic, _ = ask(G3ALIGN_CPU="native", NUMBA_CPU_NAME=jit.PORTABLE, NUMBA_CPU_FEATURES="")
    assert name == "native" and magic != jit.PORTABLE


def test_calls_from_compiled_code_do_not_specialize_on_literals():
    @jit.njit(specialize_literals=False)
    def add(a, b):
        return a + b

    @jit.njit
    def add_lit(a, b):  # numba's own behaviour, kept by default: one specialization per literal
        return a + b

    @jit.njit
    def caller(x):
        return add(x, 1) + add(x, 2) + add(x, -1) + add(x, np.int64(7)) + add_lit(x, 1) + add_lit(x, 2)

    assert caller(3) == 4 + 5 + 2 + 10 + 4 + 5
    assert len(add.signatures) == 1  # numba's own njit compiles `add` once per literal: four times
    assert len(add_lit.signatures) == 2

    @jit.njit(specialize_literals=False)
    def pick(t, i):  # indexing a heterogeneous tuple needs a literal index: the literal typing is kept
        return t[i]

    @jit.njit
    def use():
        return pick((1, 2.5), 1) + pick((1, 2.5), 0)

    assert use() == 3.5


def _env(cache: Path) -> dict:
    env = dict(os.environ, G3ALIGN_CACHE_DIR=str(cache), G3ALIGN_DETACH="0", PYTHONDONTWRITEBYTECODE="1")
    env.pop("G3ALIGN_COMPILE_NOTE", None)
    return env


def test_compile_note_once_then_cached(tmp_path):
    """The first process compiles (one note on stderr, the cache in G3ALIGN_CACHE_DIR); the second loads."""
    code = ("import numpy as np\n"
            "from g3align.aligner.mem.bns import pos2rid\n"
            "print(pos2rid(np.array([0, 10, 30], np.int64), 30, 12))\n")
    outs = [subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True)
            for _ in range(2)]
    for r in outs:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "1"
    assert outs[0].stderr.count("[M::g3align] compiling") == 1, outs[0].stderr
    assert str(jit.cache_dir().relative_to(jit.cache_root())) in outs[0].stderr.replace(str(tmp_path) + "/", "")
    assert "compiling" not in outs[1].stderr, outs[1].stderr
    assert list((tmp_path / "numba").glob("*/aligner.mem/bns.pos2rid-*.nbi"))  # in its package's own folder


def _install_copy(dst: Path) -> Path:
    """The layout pip installs (pyproject's package-dir map): g3align/{aligner,index,kernels} under dst."""
    pkg = dst / "g3align"
    shutil.copytree(ROOT / "g3align", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for d in ("aligner", "index", "kernels"):
        shutil.copytree(ROOT / d, pkg / d, ignore=shutil.ignore_patterns("__pycache__", "*.nb[ic]"))
    return pkg


def test_read_only_install_compiles_once_per_user(tmp_path):
    """An install no user may write (root-owned; run as `nobody` when the tests run as root and nobody may run
    this Python, else read-only by its modes) keeps its compiled kernels in the user's cache: the second process
    compiles nothing, the output is bwa's, and nothing is written into the install. The user's cache starts as a
    copy of this tree's cache (the cache is keyed by the sources' content, not their path), so the copy itself is
    what is tested when it is warm."""
    site = tmp_path / "site"
    pkg = _install_copy(site)
    cache = tmp_path / "cache"
    src = jit.cache_dir()
    if src.exists():
        shutil.copytree(src, cache / "numba" / src.name)
    else:
        cache.mkdir()
    (tmp_path / "out").mkdir()
    gold = tmp_path / "gold.sam"
    gold.write_bytes(gzip.decompress((ROOT / "data/golden/lambda_se.bwa.sam.gz").read_bytes()))
    idx = tmp_path / "out" / "lambda"
    env = _env(cache)
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", "-p", str(idx),
                        str(ROOT / "data/lambda.fa.gz")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    as_user = []
    if os.geteuid() == 0 and shutil.which("runuser"):  # as `nobody`, where nobody may run this interpreter
        probe = ["runuser", "-u", "nobody", "--", "env", f"HOME={tmp_path}"]
        subprocess.run(["chown", "-R", "nobody", str(cache), str(tmp_path / "out")], check=True)
        os.chmod(tmp_path, 0o755)
        r = subprocess.run([*probe, sys.executable, "-c", "import g3align.aligner.cli"], env=env,
                           capture_output=True)
        if r.returncode == 0:
            as_user = probe
    for p in [site, *site.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    before = sorted(str(p) for p in site.rglob("*"))
    try:
        runs = []
        for k in range(2):
            out = tmp_path / "out" / f"se{k}.sam"
            cmd = [*as_user, sys.executable, "-m", "g3align.aligner.cli", "mem", "-o", str(out), str(idx),
                   str(ROOT / "data/lambda_R1.fq.gz")]
            runs.append(subprocess.run(cmd, env=env, capture_output=True, text=True))
            assert runs[-1].returncode == 0, runs[-1].stderr
        assert "compiling" not in runs[1].stderr, runs[1].stderr
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "compare", "--strict",
                            str(tmp_path / "out" / "se1.sam"), str(gold)], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(str(p) for p in site.rglob("*")) == before  # nothing written into the install
        assert pkg.joinpath("aligner").is_dir()
    finally:
        for p in [site, *site.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize("device", ["cpu"])
def test_warmup_then_no_compile(tmp_path, device):
    """`g3align warmup` runs every subcommand on its synthetic data without a failure; afterwards a demo run of
    each command compiles nothing (the cache is the test session's own, so this is quick once it is warm)."""
    env = dict(os.environ, G3ALIGN_DETACH="0")
    env.pop("G3ALIGN_COMPILE_NOTE", None)
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "warmup", "-t", "2", "--device", device],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "[M::warmup] done" in r.stderr and "[E::warmup]" not in r.stderr, r.stderr
    idx = tmp_path / "lambda"
    runs = [["index", "-p", str(idx), str(ROOT / "data/lambda.fa.gz")],
            ["mem", "--device", device, str(idx), str(ROOT / "data/lambda_R1.fq.gz"),
             str(ROOT / "data/lambda_R2.fq.gz")],
            ["map", "--device", device, "-ax", "map-ont", str(ROOT / "data/lambda.fa.gz"),
             str(ROOT / "data/lambda_pbsim.fq.gz")]]
    for args in runs:
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args], env=env, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        assert "compiling" not in r.stderr, (args, r.stderr)


def test_manifest_entries_resolve():
    """Every kernel in jit_manifest.json names a compiled function that exists, with argument types that load."""
    import base64
    import importlib
    import json
    import pickle
    man = json.loads(jit._MANIFEST.read_text())["jobs"]
    assert {"index", "mem-se-cpu", "mem-pe-cpu", "map-cpu", "align-cpu"} <= set(man)
    n = 0
    for entries in man.values():
        for e in entries:
            if "cupy" in e:
                assert (ROOT / "kernels" / f"{e['cupy']}.cu").exists(), e
                continue
            obj = importlib.import_module(e["m"])
            for part in e["f"].split("."):
                obj = getattr(obj, part)
            assert hasattr(obj, "compile") and hasattr(obj, "py_func"), e
            assert isinstance(pickle.loads(base64.b64decode(e["sig"])), tuple)
            n += 1
    assert n > 20


def test_precompile_skips_an_entry_that_no_longer_compiles(tmp_path):
    """A manifest entry whose argument types the code no longer accepts (a stale manifest) is skipped by the compile
    process, which still succeeds: the job is marked done instead of compiling again at every run."""
    import base64
    import json
    import pickle

    from numba.core import types
    stale = {"m": "g3align.aligner.mem.primary", "f": "hash_64", "s": 1.0,
             "sig": base64.b64encode(pickle.dumps((types.unicode_type,))).decode()}
    r = subprocess.run([sys.executable, "-c", "from g3align.jit import _compile_stdin; _compile_stdin()"],
                       input=json.dumps([stale]), env=_env(tmp_path / "cache"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


_FIRST_RUNS = {
    "mem-pe": (["mem", "--device", "cpu", "{idx}", str(ROOT / "data/lambda_R1.fq.gz"),
                str(ROOT / "data/lambda_R2.fq.gz")], "lambda_pe.bwa.sam.gz", []),
    "map-pb": (["map", "--device", "cpu", "-ax", "map-pb", str(ROOT / "data/lambda.fa.gz"),
                str(ROOT / "data/lambda_pbsim.fq.gz")], "lambda_pbsim.mm2.sam.gz",
               ["--tags", "NM,ms,AS,nn,tp,cm,s1,s2,de,rl,SA"]),
}


@pytest.mark.parametrize("job", sorted(_FIRST_RUNS))
def test_first_run_compiles_the_listed_kernels_in_parallel(tmp_path, job):
    """From an empty cache a command's first run compiles its kernels from jit_manifest.json in parallel
    processes (one note line) and compiles nothing itself afterwards: the list is complete for it (if not, run
    scripts/jit_manifest.py). The output is the peer's; a second run compiles nothing."""
    env = _env(tmp_path / "cache")
    idx = tmp_path / "lambda"
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", "-p", str(idx),
                        str(ROOT / "data/lambda.fa.gz")], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    args, gold, tags = _FIRST_RUNS[job]
    args = [a.replace("{idx}", str(idx)) for a in args]
    (tmp_path / "gold.sam").write_bytes(gzip.decompress((ROOT / "data/golden" / gold).read_bytes()))
    for k in range(2):
        out = tmp_path / f"out{k}.sam"
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args, "-o", str(out)], env=env,
                           capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        notes = [x for x in r.stderr.splitlines() if "compiling" in x]
        if k == 0:
            assert len(notes) == 1 and " processes " in notes[0], r.stderr
        else:
            assert notes == [], r.stderr
        c = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "compare", "--strict", str(out),
                            str(tmp_path / "gold.sam"), *tags], env=env, capture_output=True, text=True)
        assert c.returncode == 0, c.stdout + c.stderr


@pytest.mark.skipif(not jit._host_has_portable(), reason="the CPU lacks x86-64-v3: nothing portable to ship")
def test_shipped_kernels_first_run_compiles_nothing(tmp_path):
    """An install that carries portable kernels (what `make wheel` builds: compiled/<tree>-x86-64-v3/ and its
    stamp) runs its first `mem` with an empty user cache without compiling: the kernels are copied into the user's
    cache once. Where the user's cache cannot be written, they are loaded from the package itself, nothing written.
    Output is bwa's either way. Once native kernels are marked complete (`g3align warmup`), those are chosen.
    The shipped copy is this test session's portable cache after a `mem` run."""
    gold = tmp_path / "gold.sam"
    gold.write_bytes(gzip.decompress((ROOT / "data/golden/lambda_se.bwa.sam.gz").read_bytes()))
    idx = tmp_path / "lambda"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU") and k != "G3ALIGN_CPU"}
    env0 = dict(clean, G3ALIGN_DETACH="0", G3ALIGN_CPU="portable")
    for args in (["index", "-p", str(idx), str(ROOT / "data/lambda.fa.gz")],
                 ["mem", "-o", str(tmp_path / "warm.sam"), str(idx), str(ROOT / "data/lambda_R1.fq.gz")]):
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args], env=env0, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    pkg = _install_copy(site)
    name = f"{jit.tree_hash()[:20]}-{jit.PORTABLE}"
    ship = pkg / "compiled" / name
    shutil.copytree(jit.cache_root() / "numba" / name, ship, ignore=shutil.ignore_patterns(".*"))
    code = "import json; from g3align import jit; jit._setup(); print(json.dumps(jit.stamp()))"
    stamp = subprocess.run([sys.executable, "-c", code], env=dict(env0, PYTHONPATH=str(site)), cwd="/",
                           capture_output=True, text=True, check=True).stdout
    (ship / "stamp.json").write_text(stamp)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    before = sorted(str(p) for p in site.rglob("*"))
    for k, cache in enumerate((tmp_path / "cache", blocker / "cache")):  # writable, then impossible to create
        env = dict(_env(cache), PYTHONPATH=str(site))
        env = {key: v for key, v in env.items() if not key.startswith("NUMBA_CPU") and key != "G3ALIGN_CPU"}
        out = tmp_path / f"se{k}.sam"
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "-o", str(out), str(idx),
                            str(ROOT / "data/lambda_R1.fq.gz")], env=env, capture_output=True, text=True, cwd="/")
        assert r.returncode == 0, r.stderr
        assert "compiling" not in r.stderr, r.stderr
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "compare", "--strict", str(out), str(gold)],
                           env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert list((tmp_path / "cache" / "numba" / name).glob("aligner.*/*.nbi"))  # seeded
    assert sorted(str(p) for p in site.rglob("*")) == before  # nothing written into the install
    native = tmp_path / "cache" / "numba" / f"{jit.tree_hash()[:20]}-native" / "ready"
    native.mkdir(parents=True)
    (native / "all").touch()
    code = "from g3align import jit; print(jit.cpu_target())"
    r = subprocess.run([sys.executable, "-c", code], env=dict(env, G3ALIGN_CACHE_DIR=str(tmp_path / "cache")),
                       cwd="/", capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "native"


def test_wide_index_first_run_compiles_nothing(tmp_path):
    """mem on an FM-index of 2**32 rows or more (the superblock layout: a human genome) precompiles JOB+wide: the same
    numba kernels as JOB (the layout keeps the array types) and the CUDA module of the wide table (OCC_WIDE =
    SUPER_SHIFT), so that its first run compiles nothing itself either (a lambda index built in the wide layout
    stands in). Output is bwa's."""
    from g3align.index import fasta as F
    from g3align.index.fm import SUPER_SHIFT, build_fm
    from g3align.index.store import save_index
    narrow, wide = jit._entries(["mem-se-cpu"]), jit._entries(["mem-se-cpu" + jit.WIDE])
    assert narrow and sorted(map(jit.entry_key, narrow)) == sorted(map(jit.entry_key, wide))
    gpu = jit._entries(["mem-pe-gpu" + jit.WIDE])
    assert [e["defines"] for e in gpu if "OCC_WIDE" in (e.get("defines") or {})] == [{"OCC_WIDE": SUPER_SHIFT}]
    ref = F.read_fasta(str(ROOT / "data/lambda.fa.gz"))
    idx = tmp_path / "lambda"
    fm = build_fm(ref.pac, sa_intv=8, wide=True)
    assert fm.occ_wide == SUPER_SHIFT and fm.occ.dtype == np.uint32 and fm.sa.dtype == np.uint32
    save_index(str(idx), ref, fm)
    env = _env(tmp_path / "cache")
    (tmp_path / "gold.sam").write_bytes(gzip.decompress((ROOT / "data/golden/lambda_se.bwa.sam.gz").read_bytes()))
    for k in range(2):
        out = tmp_path / f"out{k}.sam"
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "--device", "cpu", "-o", str(out),
                            str(idx), str(ROOT / "data/lambda_R1.fq.gz")], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        notes = [x for x in r.stderr.splitlines() if "compiling" in x]
        assert (len(notes) == 1 and " processes " in notes[0]) if k == 0 else notes == [], r.stderr
        c = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "compare", "--strict", str(out),
                            str(tmp_path / "gold.sam")], env=env, capture_output=True, text=True)
        assert c.returncode == 0, c.stdout + c.stderr
