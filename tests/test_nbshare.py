"""aligner/nbshare.unowned: views without an owner reference count, for kernels run on many threads."""
from collections import namedtuple

import numba as nb
import numpy as np
from g3align.aligner.nbshare import unowned

Pair = namedtuple("Pair", ["a", "k", "b"])


@nb.njit(cache=False)
def _use(x, t, p):
    x, t, p = unowned((x, t, p))
    s = 0
    for i in range(x.shape[0]):
        v = x[i:i + 2]  # slices of an unowned array are plain views
        s += v.sum()
    x[0] = 7  # writes go to the caller's array
    return s + t[0].sum() + t[1][1, 1] + p.a.sum() + p.k + p.b[0]


def test_unowned_reads_and_writes_through():
    x = np.arange(5, dtype=np.int64)
    t = (np.ones(3, np.int32), np.arange(4.0).reshape(2, 2))
    p = Pair(np.arange(3, dtype=np.uint8), 10, np.array([2], np.int64))
    want = sum(x[i:i + 2].sum() for i in range(5)) + 3 + 3.0 + 3 + 10 + 2
    assert _use(x, t, p) == want
    assert x[0] == 7


def test_unowned_in_python_is_identity():
    x = np.zeros(3)
    assert unowned(x) is x


def test_nbcache_keep_drops_importers_of_changed_files(tmp_path, monkeypatch):
    """scripts/nbcache_keep.py (the GPU-box numba cache): an unchanged file keeps its old mtime only if nothing it
    imports, directly or through other g3align modules, changed; new and changed files never do."""
    import hashlib
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "nbcache_keep", Path(__file__).resolve().parent.parent / "scripts" / "nbcache_keep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "aligner").mkdir()
    (tmp_path / "index").mkdir()
    src = {"aligner/samout.py": "X = 1\n",
           "aligner/pair.py": "from g3align.aligner.samout import X\n",
           "aligner/pipeline.py": "def f():\n    from g3align.aligner import pair\n",
           "aligner/reads.py": "import numpy\n",
           "index/fm.py": "import g3align.aligner.reads\n"}
    for p, text in src.items():
        (tmp_path / p).write_text(text)
    stamps = [(hashlib.sha1(t.encode()).hexdigest(), str(len(t)), f"{k}.5", p) for k, (p, t) in enumerate(src.items())]
    monkeypatch.chdir(tmp_path)
    assert sorted(f for _, f in mod.keep(stamps)) == sorted(src)  # nothing changed: every stamp back
    (tmp_path / "aligner/samout.py").write_text("X = 2\n")
    (tmp_path / "aligner/new.py").write_text("Y = 1\n")
    kept = dict((f, mt) for mt, f in mod.keep(stamps))
    assert kept == {"aligner/reads.py": "3.5", "index/fm.py": "4.5"}  # samout's importers, direct or not, dropped
