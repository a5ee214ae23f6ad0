"""Options of `g3align map`: minimap2 2.24's defaults, presets and command-line syntax.

`parse_map_args(argv)` reads a minimap2-style command line (combined short options such as
`-ax map-ont` or `-cx asm5`, `-xmap-pb`, long options with `--opt=val` or `--opt val`, the optional
arguments of `--cs[=short|long|none]` and `--rmq[=yes|no]`).  As minimap2 does, `-x` is applied first
whatever its position, then every other option in order.  Invalid values and inconsistent settings
raise MapOptError with a one-line message (the checks minimap2's `mm_check_opt` makes).
"""
from __future__ import annotations

import dataclasses
import re

# mapping flags (minimap.h)
F_NO_DIAG = 0x001
F_NO_DUAL = 0x002
F_CIGAR = 0x004
F_OUT_SAM = 0x008
F_NO_QUAL = 0x010
F_OUT_CG = 0x020
F_OUT_CS = 0x040
F_SPLICE = 0x080
F_SPLICE_FOR = 0x100
F_SPLICE_REV = 0x200
F_NO_LJOIN = 0x400
F_OUT_CS_LONG = 0x800
F_SR = 0x1000
F_FRAG_MODE = 0x2000
F_NO_PRINT_2ND = 0x4000
F_2_IO_THREADS = 0x8000
F_LONG_CIGAR = 0x10000
F_INDEPEND_SEG = 0x20000
F_SPLICE_FLANK = 0x40000
F_SOFTCLIP = 0x80000
F_FOR_ONLY = 0x100000
F_REV_ONLY = 0x200000
F_HEAP_SORT = 0x400000
F_ALL_CHAINS = 0x800000
F_OUT_MD = 0x1000000
F_COPY_COMMENT = 0x2000000
F_EQX = 0x4000000
F_PAF_NO_HIT = 0x8000000
F_NO_END_FLT = 0x10000000
F_HARD_MLEVEL = 0x20000000
F_SAM_HIT_ONLY = 0x40000000
F_RMQ = 0x80000000
F_QSTRAND = 0x100000000
F_NO_INV = 0x200000000
F_NO_HASH_NAME = 0x400000000

I_HPC = 0x1
INT_MAX = 2**31 - 1

PRESETS = ("map-ont", "map-pb", "map10k", "map-hifi", "map-ccs", "sr", "short", "asm5", "asm10", "asm20",
           "ava-ont", "ava-pb")


class MapOptError(ValueError):
    """A bad option value or combination (one line)."""


@dataclasses.dataclass
class MapOpt:
    # index (mm_idxopt_t)
    k: int = 15
    w: int = 10
    idx_flag: int = 0
    bucket_bits: int = 14
    # mapping (mm_mapopt_t), minimap2 2.24 defaults
    flag: int = 0
    seed: int = 11
    sdust_thres: int = 0
    max_qlen: int = 0
    bw: int = 500
    bw_long: int = 20000
    max_gap: int = 5000
    max_gap_ref: int = -1
    max_frag_len: int = 0
    max_chain_skip: int = 25
    max_chain_iter: int = 5000
    min_cnt: int = 3
    min_chain_score: int = 40
    chain_gap_scale: float = 0.8
    chain_skip_scale: float = 0.0
    rmq_size_cap: int = 100000
    rmq_inner_dist: int = 1000
    rmq_rescue_size: int = 1000
    rmq_rescue_ratio: float = 0.1
    mask_level: float = 0.5
    mask_len: int = INT_MAX
    pri_ratio: float = 0.8
    best_n: int = 5
    alt_drop: float = 0.15
    a: int = 2
    b: int = 4
    q: int = 4
    e: int = 2
    q2: int = 24
    e2: int = 1
    sc_ambi: int = 1
    noncan: int = 0
    junc_bonus: int = 0
    zdrop: int = 400
    zdrop_inv: int = 200
    end_bonus: int = -1
    min_dp_max: int = 80
    min_ksw_len: int = 200
    anchor_ext_len: int = 20
    anchor_ext_shift: int = 6
    max_clip_ratio: float = 1.0
    rank_min_len: int = 500
    rank_frac: float = 0.9
    pe_ori: int = 0
    pe_bonus: int = 33
    mid_occ_frac: float = 2e-4
    q_occ_frac: float = 0.01
    min_mid_occ: int = 10
    max_mid_occ: int = 1000000
    mid_occ: int = 0
    max_occ: int = 0
    max_max_occ: int = 4095
    occ_dist: int = 500
    mini_batch_size: int = 500000000
    max_sw_mat: int = 100000000
    cap_kalloc: int = 1000000000
    # command-line level
    n_threads: int = 3
    preset: str | None = None
    rg: str | None = None
    out: str | None = None
    device: str = "auto"
    sort: bool = False       # --sort: a coordinate-sorted BAM (-o FILE.bam) and its index
    sort_mem: str = "768M"   # --sort-mem: samtools sort's -m
    # base alignment as batches of ksw2 jobs on the GPU: None = with --device gpu (the default), True = --gpu-align
    # (the same; also the CPU twin's staged path for a batch-seeded CPU aligner), False = --cpu-align (per read)
    gpu_align: bool | None = None
    gpus: str = "1"           # --gpus N|all: worker processes, one per GPU (aligner/cli/shard.py)
    scheduler: str | None = None  # --scheduler ADDRESS: the batches on a Dask cluster's workers
    verbose: int = 3
    dump: str | None = None

    @property
    def is_hpc(self) -> bool:
        return bool(self.idx_flag & I_HPC)

    def index_key(self) -> str:
        """What a minimizer index depends on: k, w, HPC and bucket bits."""
        return f"k{self.k}w{self.w}{'h' if self.is_hpc else ''}b{self.bucket_bits}"


def set_preset(o: MapOpt, preset: str) -> None:
    """minimap2's mm_set_opt for one preset (applied on top of the defaults)."""
    if preset == "map-ont":
        pass
    elif preset in ("map10k", "map-pb"):
        o.idx_flag |= I_HPC
        o.k = 19
    elif preset in ("map-hifi", "map-ccs"):
        o.idx_flag = 0
        o.k, o.w = 19, 19
        o.max_gap = 10000
        o.a, o.b, o.q, o.q2, o.e, o.e2 = 1, 4, 6, 26, 2, 1
        o.occ_dist = 500
        o.min_mid_occ, o.max_mid_occ = 50, 500
        o.min_dp_max = 200
    elif preset in ("ava-ont", "ava-pb"):
        if preset == "ava-ont":
            o.idx_flag, o.k, o.w = 0, 15, 5
        else:
            o.idx_flag |= I_HPC
            o.k, o.w = 19, 5
        o.flag |= F_ALL_CHAINS | F_NO_DIAG | F_NO_DUAL | F_NO_LJOIN
        o.min_chain_score, o.pri_ratio, o.max_chain_skip = 100, 0.0, 25
        if preset == "ava-ont":
            o.bw = o.bw_long = 2000
        else:
            o.bw_long = o.bw
        o.occ_dist = 0
    elif preset.startswith("asm"):
        scores = {"asm5": (1, 19, 39, 81, 3, 1), "asm10": (1, 9, 16, 41, 2, 1), "asm20": (1, 4, 6, 26, 2, 1)}
        if preset not in scores:
            raise MapOptError(f"unknown preset '{preset}'")
        o.idx_flag = 0
        o.k, o.w = 19, 19
        o.bw, o.bw_long = 1000, 100000
        o.max_gap = 10000
        o.flag |= F_RMQ
        o.min_mid_occ, o.max_mid_occ = 50, 500
        o.min_dp_max = 200
        o.best_n = 50
        o.a, o.b, o.q, o.q2, o.e, o.e2 = scores[preset]
        o.zdrop = o.zdrop_inv = 200
        if preset == "asm20":
            o.w = 10
    elif preset in ("sr", "short"):
        o.idx_flag = 0
        o.k, o.w = 21, 11
        o.flag |= F_SR | F_FRAG_MODE | F_NO_PRINT_2ND | F_2_IO_THREADS | F_HEAP_SORT
        o.pe_ori = 0 << 1 | 1
        o.a, o.b, o.q, o.e, o.q2, o.e2 = 2, 8, 12, 2, 24, 1
        o.zdrop = o.zdrop_inv = 100
        o.end_bonus = 10
        o.max_frag_len = 800
        o.max_gap = 100
        o.bw = o.bw_long = 100
        o.pri_ratio = 0.5
        o.min_cnt = 2
        o.min_chain_score = 25
        o.min_dp_max = 40
        o.best_n = 20
        o.mid_occ = 1000
        o.max_occ = 5000
        o.mini_batch_size = 50000000
    else:
        raise MapOptError(f"unknown preset '{preset}'")
    o.preset = preset


# ------------------------------------------------------------------------------ command line
SHORT = "2aSDw:k:K:t:r:f:Vv:g:G:I:d:XT:s:x:Hcp:M:n:z:A:B:O:E:m:N:Qu:R:hF:LC:yYPo:e:U:"
_SHORT_ARG = {c for c, nxt in zip(SHORT, SHORT[1:] + " ") if c != ":" and nxt == ":"}
_SHORT_ALL = {c for c in SHORT if c != ":"}
# name -> (takes: 0 no, 1 required, 2 optional, key)
LONG = {
    "bucket-bits": (1, "bucket-bits"), "mb-size": (1, "K"), "seed": (1, "seed"), "no-kalloc": (0, "ignore"),
    "print-qname": (0, "ignore"), "no-self": (0, "D"), "max-chain-skip": (1, "max-chain-skip"),
    "min-dp-len": (1, "min-dp-len"), "splice": (0, "splice"), "no-long-join": (0, "no-long-join"),
    "sr": (0, "sr"), "frag": (1, "frag"), "secondary": (1, "secondary"), "cs": (2, "cs"),
    "end-bonus": (1, "end-bonus"), "no-pairing": (0, "no-pairing"), "end-seed-pen": (1, "end-seed-pen"),
    "for-only": (0, "for-only"), "rev-only": (0, "rev-only"), "heap-sort": (1, "heap-sort"),
    "all-chain": (0, "P"), "dual": (1, "dual"), "max-clip-ratio": (1, "max-clip-ratio"),
    "min-occ-floor": (1, "min-occ-floor"), "MD": (0, "MD"), "score-N": (1, "score-N"), "eqx": (0, "eqx"),
    "paf-no-hit": (0, "paf-no-hit"), "no-end-flt": (0, "no-end-flt"), "hard-mask-level": (0, "hard-mask-level"),
    "cap-sw-mem": (1, "cap-sw-mem"), "max-qlen": (1, "max-qlen"), "max-chain-iter": (1, "max-chain-iter"),
    "sam-hit-only": (0, "sam-hit-only"), "chain-gap-scale": (1, "chain-gap-scale"), "alt-drop": (1, "alt-drop"),
    "mask-len": (1, "mask-len"), "rmq": (2, "rmq"), "cap-kalloc": (1, "cap-kalloc"), "q-occ-frac": (1, "q-occ-frac"),
    "chain-skip-scale": (1, "chain-skip-scale"), "no-hash-name": (0, "no-hash-name"), "help": (0, "h"),
    "qstrand": (0, "qstrand"),
    "max-intron-len": (1, "G"), "version": (0, "V"), "min-count": (1, "n"), "min-chain-score": (1, "m"),
    "mask-level": (1, "M"), "min-dp-score": (1, "s"), "sam": (0, "a"),
    # g3align's own
    "device": (1, "device"), "gpu-align": (0, "gpu-align"), "cpu-align": (0, "cpu-align"),
    "sort": (0, "sort"), "sort-mem": (1, "sort-mem"), "gpus": (1, "gpus"), "scheduler": (1, "scheduler"),
}
UNSUPPORTED = {"splice": "--splice", "G": "-G",
               "u": "-u", "C": "-C", "I": "-I", "S": "-S"}


def _tokens(argv):
    """Split argv like ketopt: yields (key, value|None) for options, ('', arg) for positionals."""
    i, n = 0, len(argv)
    while i < n:
        a = argv[i]
        if a == "--":
            for p in argv[i + 1:]:
                yield "", p
            return
        if a.startswith("--") and len(a) > 2:
            name, eq, val = a[2:].partition("=")
            if name not in LONG:
                raise MapOptError(f"unknown option in \"{a}\"")
            takes, key = LONG[name]
            if takes == 0:
                if eq:
                    raise MapOptError(f"option --{name} takes no argument")
                yield key, None
            elif takes == 2:
                yield key, (val if eq else None)
            else:
                if not eq:
                    if i + 1 >= n:
                        raise MapOptError(f"missing argument of option --{name}")
                    i += 1
                    val = argv[i]
                yield key, val
        elif a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                c = a[j]
                if c not in _SHORT_ALL:
                    raise MapOptError(f"unknown option in \"{a}\"")
                if c in _SHORT_ARG:
                    val = a[j + 1:]
                    if not val:
                        if i + 1 >= n:
                            raise MapOptError(f"missing argument of option -{c}")
                        i += 1
                        val = argv[i]
                    yield c, val
                    break
                yield c, None
                j += 1
        else:
            yield "", a
        i += 1


def parse_num(s: str, what: str) -> int:
    """minimap2's mm_parse_num: a number with an optional K/M/G suffix, rounded."""
    m = re.fullmatch(r"\s*([-+]?[0-9.]+(?:[eE][-+]?\d+)?)([kKmMgG]?)\s*", s)
    if not m:
        raise MapOptError(f"option {what}: invalid number '{s}'")
    x = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    return int(x + .499)


def _int(s, what):
    try:
        return int(s)
    except ValueError:
        raise MapOptError(f"option {what}: invalid integer '{s}'")


def _float(s, what):
    try:
        return float(s)
    except ValueError:
        raise MapOptError(f"option {what}: invalid number '{s}'")


def _pair(s, what, conv=_int):
    a, _, b = s.partition(",")
    return conv(a, what), (conv(b, what) if b else None)


def _yes_no(v, what) -> bool:
    if v in ("yes", "y"):
        return True
    if v in ("no", "n"):
        return False
    raise MapOptError(f"option --{what} only accepts 'yes' or 'no'")


def _str(v, what):
    return v


# options that only set flag bits
_FLAG_SETS = {
    "c": F_OUT_CG | F_CIGAR, "a": F_OUT_SAM | F_CIGAR, "D": F_NO_DIAG, "P": F_ALL_CHAINS,
    "X": F_ALL_CHAINS | F_NO_DIAG | F_NO_DUAL | F_NO_LJOIN, "Q": F_NO_QUAL, "Y": F_SOFTCLIP, "L": F_LONG_CIGAR,
    "y": F_COPY_COMMENT, "2": F_2_IO_THREADS, "no-long-join": F_NO_LJOIN, "sr": F_SR, "no-pairing": F_INDEPEND_SEG,
    "for-only": F_FOR_ONLY, "rev-only": F_REV_ONLY, "MD": F_OUT_MD, "eqx": F_EQX, "paf-no-hit": F_PAF_NO_HIT,
    "no-end-flt": F_NO_END_FLT, "hard-mask-level": F_HARD_MLEVEL, "sam-hit-only": F_SAM_HIT_ONLY,
    "no-hash-name": F_NO_HASH_NAME, "qstrand": F_QSTRAND | F_NO_INV,
}
# options that set one field: key -> (MapOpt attribute, value parser)
_SETTERS = {
    "w": ("w", _int), "k": ("k", _int), "t": ("n_threads", _int), "d": ("dump", _str), "v": ("verbose", _int),
    "g": ("max_gap", parse_num), "F": ("max_frag_len", parse_num), "p": ("pri_ratio", _float),
    "M": ("mask_level", _float), "T": ("sdust_thres", _int), "n": ("min_cnt", _int), "m": ("min_chain_score", _int),
    "A": ("a", _int), "B": ("b", _int), "s": ("min_dp_max", _int), "K": ("mini_batch_size", parse_num),
    "e": ("occ_dist", parse_num), "R": ("rg", _str), "bucket-bits": ("bucket_bits", _int), "seed": ("seed", _int),
    "max-chain-skip": ("max_chain_skip", _int), "max-chain-iter": ("max_chain_iter", _int),
    "min-dp-len": ("min_ksw_len", _int), "end-bonus": ("end_bonus", _int), "end-seed-pen": ("anchor_ext_shift", _int),
    "max-clip-ratio": ("max_clip_ratio", _float), "min-occ-floor": ("min_mid_occ", _int), "score-N": ("sc_ambi", _int),
    "cap-sw-mem": ("max_sw_mat", parse_num), "max-qlen": ("max_qlen", parse_num),
    "chain-gap-scale": ("chain_gap_scale", _float), "chain-skip-scale": ("chain_skip_scale", _float),
    "alt-drop": ("alt_drop", _float), "mask-len": ("mask_len", parse_num), "cap-kalloc": ("cap_kalloc", parse_num),
    "q-occ-frac": ("q_occ_frac", _float),
}
# yes/no options: key -> (flag bit, whether "yes" sets it)
_YES_NO = {"frag": (F_FRAG_MODE, True), "secondary": (F_NO_PRINT_2ND, False), "heap-sort": (F_HEAP_SORT, True),
           "dual": (F_NO_DUAL, False)}


def parse_map_args(argv: list[str]) -> tuple[MapOpt, list[str], dict]:
    """Parse `g3align map` arguments.  Returns (options, positional args, extras).

    extras: 'help' / 'version' requests.
    """
    toks = list(_tokens(argv))
    o = MapOpt()
    for key, val in toks:
        if key == "x":
            set_preset(o, val)
    pos, extra, old_best_n = [], {}, -1
    for key, val in toks:
        if key == "":
            pos.append(val)
            continue
        if key in UNSUPPORTED:
            raise MapOptError(f"{UNSUPPORTED[key]} is not supported by g3align map")
        what = f"-{key}" if len(key) == 1 else f"--{key}"
        if key in ("x", "ignore"):
            continue
        if key in _FLAG_SETS:
            o.flag |= _FLAG_SETS[key]
        elif key in _SETTERS:
            attr, conv = _SETTERS[key]
            setattr(o, attr, conv(val, what))
        elif key in _YES_NO:
            bit, yes_sets = _YES_NO[key]
            if _yes_no(val, key) == yes_sets:
                o.flag |= bit
            else:
                o.flag &= ~bit
        elif key == "H":
            o.idx_flag |= I_HPC
        elif key == "N":
            old_best_n, o.best_n = o.best_n, _int(val, what)
        elif key in ("h", "V"):
            extra["help" if key == "h" else "version"] = True
        elif key == "o":
            o.out = None if val == "-" else val
        elif key == "rmq":
            o.flag = (o.flag | F_RMQ) if val is None or _yes_no(val, "rmq") else (o.flag & ~F_RMQ)
        elif key == "cs":
            o.flag |= F_OUT_CS | F_CIGAR
            if val is None or val == "short":
                o.flag &= ~F_OUT_CS_LONG
            elif val == "long":
                o.flag |= F_OUT_CS_LONG
            elif val == "none":
                o.flag &= ~F_OUT_CS
            else:
                raise MapOptError("--cs only takes 'short', 'long' or 'none'")
        elif key == "r":
            bw, bwl = _pair(val, "-r", lambda s, w: parse_num(s, w))
            o.bw = bw
            if bwl is not None:
                o.bw_long = bwl
        elif key == "U":
            lo, hi = _pair(val, "-U")
            o.min_mid_occ = lo
            if hi is not None:
                o.max_mid_occ = hi
        elif key == "f":
            x, y = _pair(val, "-f", _float)
            if x < 1.0:
                o.mid_occ_frac, o.mid_occ = x, 0
            else:
                o.mid_occ = int(x + .499)
            if y is not None:
                o.max_occ = int(y + .499)
        elif key == "z":
            z, zi = _pair(val, "-z")
            o.zdrop = o.zdrop_inv = z
            if zi is not None:
                o.zdrop_inv = zi
        elif key == "O":
            q, q2 = _pair(val, "-O")
            o.q = o.q2 = q
            if q2 is not None:
                o.q2 = q2
        elif key == "E":
            e, e2 = _pair(val, "-E")
            o.e = o.e2 = e
            if e2 is not None:
                o.e2 = e2
        elif key == "device":
            if val not in ("auto", "cpu", "gpu"):
                raise MapOptError(f"--device must be auto, cpu or gpu, not '{val}'")
            o.device = val
        elif key == "gpus":
            o.gpus = val
        elif key == "scheduler":
            o.scheduler = val
        elif key == "sort":
            o.sort = True
        elif key == "sort-mem":
            o.sort_mem = val
        elif key == "gpu-align":
            o.gpu_align = True
        elif key == "cpu-align":
            o.gpu_align = False
        else:  # pragma: no cover - every LONG/SHORT key is handled above
            raise MapOptError(f"option '{key}' is not handled")
    check_opt(o)
    if o.best_n == 0:
        o.best_n, o.flag = old_best_n, o.flag | F_NO_PRINT_2ND
    return o, pos, extra


def check_opt(o: MapOpt) -> None:
    """minimap2's mm_check_opt, as one-line errors."""
    if o.bw > o.bw_long:
        raise MapOptError(f"with '-rNUM1,NUM2', NUM1 ({o.bw}) can't be larger than NUM2 ({o.bw_long})")
    if (o.flag & F_RMQ) and (o.flag & (F_SR | F_SPLICE)):
        raise MapOptError("--rmq doesn't work with --sr or --splice")
    if o.k <= 0 or o.w <= 0:
        raise MapOptError("-k and -w must be positive")
    if o.k > 28:
        raise MapOptError("-k must be no larger than 28")
    if o.w >= 256:
        raise MapOptError("-w must be smaller than 256")
    if o.best_n < 0:
        raise MapOptError("-N must be no less than 0")
    if not 0.0 <= o.pri_ratio <= 1.0:
        raise MapOptError("-p must be within 0 and 1 (including 0 and 1)")
    if (o.flag & F_FOR_ONLY) and (o.flag & F_REV_ONLY):
        raise MapOptError("--for-only and --rev-only can't be applied at the same time")
    if (o.flag & F_QSTRAND) and ((o.flag & (F_OUT_SAM | F_SPLICE | F_FRAG_MODE)) or (o.idx_flag & I_HPC)):
        raise MapOptError("--qstrand doesn't work with -a, -H, --frag or --splice")
    if o.e <= 0 or o.q <= 0:
        raise MapOptError("-O and -E must be positive")
    if (o.q != o.q2 or o.e != o.e2) and not (o.e > o.e2 and o.q + o.e < o.q2 + o.e2):
        raise MapOptError("dual gap penalties violating E1>E2 and O1+E1<O2+E2")
    if (o.q + o.e) + (o.q2 + o.e2) > 127:
        raise MapOptError("scoring system violating ({-O}+{-E})+({-O2}+{-E2}) <= 127")
    if o.zdrop < o.zdrop_inv:
        raise MapOptError("Z-drop should not be less than inversion-Z-drop")
    if (o.flag & F_NO_PRINT_2ND) and (o.flag & F_ALL_CHAINS):
        raise MapOptError("-X/-P and --secondary=no can't be applied at the same time")
    if o.n_threads < 1:
        raise MapOptError("-t must be positive")


def update_mid_occ(o: MapOpt, cal_max_occ) -> None:
    """minimap2's mm_mapopt_update: mid_occ from the index (cal_max_occ(frac) -> int) unless set."""
    if o.mid_occ <= 0:
        o.mid_occ = int(cal_max_occ(o.mid_occ_frac))
        if o.mid_occ < o.min_mid_occ:
            o.mid_occ = o.min_mid_occ
        if o.max_mid_occ > o.min_mid_occ and o.mid_occ > o.max_mid_occ:
            o.mid_occ = o.max_mid_occ
    if o.bw_long < o.bw:
        o.bw_long = o.bw
