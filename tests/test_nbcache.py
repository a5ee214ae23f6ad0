"""scripts/nbcache_keep.py: which numba cache entries the GPU box may reuse."""
import hashlib

from conftest import load_script


def test_nbcache_keep_drops_importers_of_changed_files(tmp_path, monkeypatch):
    """scripts/nbcache_keep.py (the GPU-box numba cache): an unchanged file keeps its old mtime only if nothing it
    imports, directly or through other g3align modules, changed; new and changed files never do."""
    mod = load_script("nbcache_keep")
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
