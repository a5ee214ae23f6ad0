"""scripts/nbcache_keep.py: which numba cache entries the GPU box may reuse."""
import hashlib

from conftest import load_script


def _tree(tmp_path, monkeypatch, src: dict) -> list:
    """aligner/ and index/ sources written under tmp_path (the working directory now): their stamps lines, file k
    with mtime 'k.5'."""
    (tmp_path / "aligner").mkdir()
    (tmp_path / "index").mkdir()
    for p, text in src.items():
        (tmp_path / p).write_text(text)
    monkeypatch.chdir(tmp_path)
    return [(hashlib.sha1(t.encode()).hexdigest(), str(len(t)), f"{k}.5", p) for k, (p, t) in enumerate(src.items())]


def test_nbcache_keep_drops_importers_of_changed_files(tmp_path, monkeypatch):
    """scripts/nbcache_keep.py (the GPU-box numba cache): an unchanged file keeps its old mtime only if nothing it
    imports, directly or through other g3align modules, changed; new and changed files never do."""
    mod = load_script("nbcache_keep")
    src = {"aligner/samout.py": "import numba\nX = 1\n",
           "aligner/pair.py": "from g3align.aligner.samout import X\n",
           "aligner/pipeline.py": "def f():\n    from g3align.aligner import pair\n",
           "aligner/reads.py": "import numpy\n",
           "index/fm.py": "import g3align.aligner.reads\n"}
    stamps = _tree(tmp_path, monkeypatch, src)
    assert sorted(f for _, f in mod.keep(stamps)) == sorted(src)  # nothing changed: every stamp back
    (tmp_path / "aligner/samout.py").write_text("import numba\nX = 2\n")
    (tmp_path / "aligner/new.py").write_text("Y = 1\n")
    kept = dict((f, mt) for mt, f in mod.keep(stamps))
    assert kept == {"aligner/reads.py": "3.5", "index/fm.py": "4.5"}  # samout's importers, direct or not, dropped


def test_nbcache_keep_changed_file_without_numba_stales_only_itself(tmp_path, monkeypatch):
    """A changed file that imports no numba holds no jitted code, so its importers keep their cache; a changed numba
    file still stales everything that reaches it through imports, files without numba on the way included."""
    mod = load_script("nbcache_keep")
    src = {"aligner/ksw2.py": "import numba as nb\n",
           "aligner/mmext.py": "def f():\n    from g3align.aligner import ksw2\n",
           "aligner/mmpipeline.py": "from numba import njit\nfrom g3align.aligner import mmext\n"}
    stamps = _tree(tmp_path, monkeypatch, src)
    (tmp_path / "aligner/mmext.py").write_text("GATE = 1\ndef f():\n    from g3align.aligner import ksw2\n")
    assert dict((f, mt) for mt, f in mod.keep(stamps)) == {"aligner/ksw2.py": "0.5", "aligner/mmpipeline.py": "2.5"}
    (tmp_path / "aligner/ksw2.py").write_text("import numba as nb\nX = 1\n")
    assert mod.keep(stamps) == []  # ksw2 changed: mmpipeline reaches it through mmext


def test_nbcache_prune_keeps_only_functions_at_their_place(tmp_path, monkeypatch):
    """scripts/nbcache_prune.py: a cache file travels only while its name's <function>-<line> is a decorated def
    there; moved, renamed and removed functions' files are dropped, unknown names kept."""
    mod = load_script("nbcache_prune")
    (tmp_path / "aligner" / "__pycache__").mkdir(parents=True)
    (tmp_path / "aligner" / "pair.py").write_text(
        "import numba as nb\n\n\n@nb.njit(cache=True,\n        nogil=True)\ndef f(x):\n    return x\n\n\n"
        "@nb.njit(cache=True)\ndef g(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    names = {"pair.f-4.py312.nbi": True, "pair.f-4.py312.1.nbc": True, "pair.g-10.py312.2.nbc": True,
             "pair.f-3.py312.nbi": False,      # moved: line 3 is no decorator now
             "pair.g-4.py312.nbi": False,      # line 4 decorates f, not g
             "pair.h-10.py312.nbi": False,     # no such function there
             "gone.f-4.py312.nbi": False,      # no such file
             "odd-name.nbi": True}             # not numba's naming: kept
    assert all(mod.current(f"aligner/__pycache__/{n}") == want for n, want in names.items())


def test_nbcache_rekey_files_entries_under_one_cpu_name(tmp_path):
    """scripts/nbcache_rekey.py: per signature an entry under the pinned CPU name is kept; another name's entry
    with the same feature string is filed under it when the pinned name has none; other entries and their .nbc
    files are dropped."""
    import pickle
    mod = load_script("nbcache_rekey")
    d = tmp_path / "aligner" / "__pycache__"
    d.mkdir(parents=True)
    feats, other = "+avx2,+avx512f", "+sse2"

    def key(sig, cpu, f=feats):
        return (sig, ("x86_64-unknown-linux-gnu", cpu, f), ("h1", "h2"))
    overloads = {key("a", "emeraldrapids"): "m.f-1.py312.1.nbc", key("a", "sapphirerapids"): "m.f-1.py312.2.nbc",
                 key("b", "sapphirerapids"): "m.f-1.py312.3.nbc", key("c", "znver4", other): "m.f-1.py312.4.nbc"}
    for name in overloads.values():
        (d / name).write_bytes(b"code")
    nbi = d / "m.f-1.py312.nbi"
    with open(nbi, "wb") as fh:
        pickle.dump("0.68.0", fh, protocol=-1)
        fh.write(pickle.dumps(((1.0, 10), overloads), protocol=-1))
    moved, dropped = mod.rekey(nbi, "emeraldrapids", feats)
    assert (moved, dropped) == (1, 2)
    version, stamp, got = mod.load(nbi)
    assert version == "0.68.0" and stamp == (1.0, 10)
    assert got == {key("a", "emeraldrapids"): "m.f-1.py312.1.nbc", key("b", "emeraldrapids"): "m.f-1.py312.3.nbc"}
    assert sorted(p.name for p in d.glob("*.nbc")) == ["m.f-1.py312.1.nbc", "m.f-1.py312.3.nbc"]
    assert mod.rekey(nbi, "emeraldrapids", feats) == (0, 0)  # a second pass changes nothing
