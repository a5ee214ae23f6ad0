"""Tests for aligner/map/options.py: minimap2 2.24 presets and command-line syntax."""
import pytest

from g3align.aligner.map import options as M


def test_combined_short_options_and_preset_first():
    o, pos, _ = M.parse_map_args(["-t4", "-ax", "map-ont", "ref.fa", "r.fq"])
    assert (o.k, o.w, o.is_hpc, o.n_threads) == (15, 10, False, 4)
    assert o.flag & M.F_OUT_SAM and o.flag & M.F_CIGAR
    assert pos == ["ref.fa", "r.fq"]
    # -x is applied before every other option wherever it stands: -k given before -x still wins
    o, _, _ = M.parse_map_args(["-k17", "-x", "map-pb", "r", "q"])
    assert (o.k, o.is_hpc) == (17, True)


@pytest.mark.parametrize("preset,k,w,hpc,a,b,q,e,q2,e2", [
    ("map-ont", 15, 10, False, 2, 4, 4, 2, 24, 1),
    ("map-pb", 19, 10, True, 2, 4, 4, 2, 24, 1),
    ("map-hifi", 19, 19, False, 1, 4, 6, 2, 26, 1),
    ("sr", 21, 11, False, 2, 8, 12, 2, 24, 1),
    ("asm5", 19, 19, False, 1, 19, 39, 3, 81, 1),
])
def test_presets(preset, k, w, hpc, a, b, q, e, q2, e2):
    o, _, _ = M.parse_map_args(["-x", preset, "r", "q"])
    assert (o.k, o.w, o.is_hpc, o.a, o.b, o.q, o.e, o.q2, o.e2) == (k, w, hpc, a, b, q, e, q2, e2)


def test_long_options_and_pairs():
    o, _, _ = M.parse_map_args(["-cx", "map-pb", "--cs=long", "--secondary=no", "-r", "1k,30k", "-O5,30",
                                "-E", "3,1", "-z", "300", "-f", "0.001,400", "--MD", "r"])
    assert o.flag & M.F_OUT_CG and o.flag & M.F_OUT_CS_LONG and o.flag & M.F_NO_PRINT_2ND and o.flag & M.F_OUT_MD
    assert (o.bw, o.bw_long, o.q, o.q2, o.e, o.e2, o.zdrop, o.zdrop_inv) == (1000, 30000, 5, 30, 3, 1, 300, 300)
    assert (o.mid_occ_frac, o.mid_occ, o.max_occ) == (0.001, 0, 400)
    o, _, _ = M.parse_map_args(["--cs", "-N", "0", "r"])
    assert o.flag & M.F_OUT_CS and not o.flag & M.F_OUT_CS_LONG
    assert o.best_n == 5 and o.flag & M.F_NO_PRINT_2ND          # -N 0 means --secondary=no


@pytest.mark.parametrize("argv,msg", [
    (["-x", "map-foo", "r"], "unknown preset"),
    (["--nope", "r"], "unknown option"),
    (["-k"], "missing argument"),
    (["-k", "x", "r"], "invalid integer"),
    (["-O", "4", "-E", "2,3", "r"], "dual gap penalties"),
    (["-z", "100,200", "r"], "Z-drop"),
    (["-p", "2", "r"], "-p must be within"),
    (["--secondary=maybe", "r"], "only accepts"),
    (["-k", "29", "r"], "no larger than 28"),
])
def test_bad_options(argv, msg):
    with pytest.raises(M.MapOptError, match=msg):
        M.parse_map_args(argv)


def test_mid_occ_update():
    o, _, _ = M.parse_map_args(["r"])
    M.update_mid_occ(o, lambda f: 3)
    assert o.mid_occ == 10                                      # raised to min_mid_occ
    o, _, _ = M.parse_map_args(["-x", "map-hifi", "r"])
    M.update_mid_occ(o, lambda f: 10**6)
    assert o.mid_occ == 500                                     # capped at max_mid_occ


def test_gpu_align_option():
    """--gpu-align / --cpu-align (g3align's own) force the staged base alignment on or off; by default (None)
    it runs when the batch is on the GPU (MapAligner)."""
    opt, pos, _ = M.parse_map_args(["-ax", "map-pb", "--gpu-align", "ref.fa", "r.fq"])
    assert opt.gpu_align is True and pos == ["ref.fa", "r.fq"]
    opt, pos, _ = M.parse_map_args(["-ax", "map-pb", "--cpu-align", "ref.fa", "r.fq"])
    assert opt.gpu_align is False and pos == ["ref.fa", "r.fq"]
    opt, _, _ = M.parse_map_args(["-ax", "map-pb", "ref.fa", "r.fq"])
    assert opt.gpu_align is None
