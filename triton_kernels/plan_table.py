"""Where kernel="auto" gets its plan without timing anything on the call path.

A call belongs to a *shape class*: M, N and K rounded up to powers of two (`bucket`), the operands' layout, how
TMA can read them (`align_class`), the dtype and the accumulation; a *plan table* maps classes to plans for one GPU
(arch and SM count). Tables are made offline by `python -m compare tune`, which times the candidates over a grid of
shapes and keeps, per class, the plan that is fastest across the class's shapes; the tables of the GPUs the project
was tuned on ship as package data in `triton_kernels/tables/` (each file records its device, versions, commit and
command). A call's plan, in order:

1. the table entry of its class;
2. else the entry of the nearest class of the same dtype, accumulation, layout and alignment, at most
   `NEAREST_OCTAVES` octaves away in M, N and K together;
3. else `heuristic` (a GPU with no table, or a class far from every entry): rules, no timing.

`tune="exact"` (or `TENSORCORE_HGEMM_TUNE=exact`) times the candidates on the call's own operands instead, as
every call did before the tables; its results persist in a user cache file (`ExactCache`), keyed by the exact call
facts, the device, the torch and Triton versions and a hash of the kernel sources, so a later process or another
machine of the same kind reuses them and a changed kernel or version never does.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import threading
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import triton

from hgemm_common.errors import HgemmValueError
from hgemm_common.operands import major, tma_describable

from .common import Config, cdiv

FORMAT = 1  # version of both file formats below; a file of another version is ignored with a warning
TABLE_DIR = Path(__file__).parent / "tables"
TABLE_ENV = "TENSORCORE_HGEMM_PLAN_TABLE"  # a table file to use instead of the shipped ones (`compare tune --out`)
CACHE_ENV = "TENSORCORE_HGEMM_PLAN_CACHE"  # the exact-plan cache file
TUNE_ENV = "TENSORCORE_HGEMM_TUNE"  # "exact": tune="exact" by default
TUNES = ("table", "exact")
BUCKET_CAP = 1 << 17  # M, N, K above this share the top bucket
NEAREST_OCTAVES = 4  # how far (sum of |log2| bucket differences) a class may borrow a neighbour's plan


def bucket(x: int) -> int:
    """The power of two at or above x (1, 2, 4, ...), capped at BUCKET_CAP: the class of a dimension."""
    return min(triton.next_power_of_2(max(int(x), 1)), BUCKET_CAP)


def _octaves(a: int, b: int) -> int:
    return abs(a.bit_length() - b.bit_length())


def rows_off_sectors(t: torch.Tensor) -> bool:
    """Whether a TMA-describable operand's rows (as TMA reads it: a column-major one by columns) start off the
    32-byte sectors: each 128-byte row of a TMA box then spans five sectors instead of four, which costs the TMA
    kernels enough that the dispatcher also weighs copies of such operands."""
    ld = t.stride(0) if major(t) == "N" else t.stride(1)
    return (ld * t.element_size()) % 32 != 0 or t.data_ptr() % 32 != 0


def align_class(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> str:
    """Three letters, for A, B and C: "t" TMA reads it in place with rows on 32-byte sectors, "o" in place with rows
    off them, "-" not describable (a TMA kernel needs a copy). C (out=None: the row-major (M, N) output hgemm
    allocates) is "t" when TMA can store it in place (row-major and describable), else "-"."""
    def letter(t):
        return "-" if not tma_describable(t) else "o" if rows_off_sectors(t) else "t"
    if out is None:
        c = "t" if b.shape[1] % 8 == 0 else "-"
    else:
        c = "t" if tma_describable(out) and major(out) == "N" else "-"
    return letter(a) + letter(b) + c


def layout_class(a: torch.Tensor, b: torch.Tensor) -> str:
    """A's and B's storage order: N row-major, T column-major, S neither (a strided view)."""
    return "".join(major(t) or "S" for t in (a, b))


@dataclass(frozen=True)
class ShapeClass:
    dtype: str  # "fp16" | "bf16"
    acc: str  # "fp32" | "fp16"
    layout: str  # layout_class
    align: str  # align_class
    m: int  # bucket(M)
    n: int
    k: int

    @property
    def kind(self) -> str:
        """Everything but the size buckets: classes of one kind may borrow each other's plans."""
        return f"{self.dtype}/{self.acc}/{self.layout}/{self.align}"

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.m}x{self.n}x{self.k}"

    @classmethod
    def from_key(cls, key: str) -> "ShapeClass":
        dtype, acc, layout, align, size = key.split("/")
        m, n, k = (int(x) for x in size.split("x"))
        return cls(dtype, acc, layout, align, m, n, k)

    def distance(self, other: "ShapeClass") -> int:
        return _octaves(self.m, other.m) + _octaves(self.n, other.n) + _octaves(self.k, other.k)


def shape_class(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, dtype: str, acc: str) -> ShapeClass:
    m, k = a.shape
    return ShapeClass(dtype, acc, layout_class(a, b), align_class(a, b, out), bucket(m), bucket(b.shape[1]),
                      bucket(k))


# ----------------------------------------------------------------------------------------------------------------
# Plans as data
# ----------------------------------------------------------------------------------------------------------------
def stage_text(stage: tuple[bool, bool, bool]) -> str:
    """(True, False, False) -> "A": the operands a plan copies to aligned buffers first."""
    return "".join(x for x, s in zip("ABC", stage) if s)


def stage_of(text: str) -> tuple[bool, bool, bool]:
    if not set(text) <= set("ABC"):
        raise HgemmValueError(f"stage {text!r} must name operands among A, B, C")
    return tuple(x in text for x in "ABC")


@dataclass(frozen=True)
class Plan:
    """What one kind of call runs: a kernel (its record's name, "triton_tma"), its configuration, and which of A, B,
    C go through an aligned copy first (TMA kernels on operands TMA cannot describe). Tables and the exact cache
    store it as JSON (`as_json`, `from_json`; files written before the records' names were kernel='s read the
    short names they hold, "tma", as the records' older names)."""
    kernel: str
    config: Config
    stage: tuple[bool, bool, bool] = (False, False, False)
    ms: float | None = None  # measured device time when the plan was chosen by timing
    # where it came from: "table", "model: TERM" (triton_kernels/planner.py), "nearest", "heuristic", "exact",
    # "pinned", "interpreter"
    source: str = "table"

    @property
    def name(self) -> str:
        staged = [x for x, s in zip("ABC", self.stage) if s]
        return f"{self.kernel} {self.config.name}" + (f" (staged {', '.join(staged)})" if staged else "")

    def as_json(self) -> dict:
        d = {"kernel": self.kernel, "config": self.config.name, "stage": stage_text(self.stage)}
        if self.ms is not None:
            d["ms"] = round(self.ms, 6)
        return d

    @classmethod
    def from_json(cls, d: dict, source: str = "table") -> "Plan":
        """Raises ValueError/KeyError/TypeError on anything but a well-formed plan of a known kernel."""
        from .contract import optional
        from .variants import BY_KERNEL, kernel_module

        kernel = record_name(d["kernel"])
        if kernel not in BY_KERNEL:
            raise HgemmValueError(f"unknown kernel {d['kernel']!r}")
        cfg = Config.from_name(str(d["config"]))
        optional(kernel_module(BY_KERNEL[kernel]), "check_config")(cfg)
        ms = d.get("ms")
        return cls(kernel, cfg, stage_of(str(d.get("stage", ""))), float(ms) if ms is not None else None, source)


def record_name(kernel: str) -> str:
    """The record's name for a kernel a table or cache file names: itself, or for an older name the name it stands
    for ("tma" -> "triton_tma"); anything else unchanged (`Plan.from_json` refuses it)."""
    from .variants import KERNEL_NAMES

    name = KERNEL_NAMES.get(kernel) if isinstance(kernel, str) else None
    return kernel if name in (None, "auto") else name


@dataclass(frozen=True)
class Entry:
    cls: ShapeClass
    plan: Plan  # what kernel="auto" runs
    kernels: dict  # kernel= name -> Config: each timed kernel's best configuration (an explicit kernel= call)
    shapes: tuple[str, ...] = ()  # the grid shapes the tuner timed for this class


def shapes_of(shapes, key: str) -> tuple[str, ...]:
    """An entry's timed shapes as its file lists them, each checked to read "MxNxK" with positive integers (the
    planner parses them on every call it asks the entry about: `dispatch.table_holds`)."""
    if not isinstance(shapes, list):
        raise HgemmValueError(f"plan table entry {key}: shapes must be a list of 'MxNxK' strings, got {shapes!r}")
    for s in shapes:
        dims = s.split("x") if isinstance(s, str) else []
        if len(dims) != 3 or not all(d.isdigit() and int(d) > 0 for d in dims):
            raise HgemmValueError(f"plan table entry {key}: shape {s!r} is not of the form MxNxK (positive integers)")
    return tuple(shapes)


class Table:
    """One GPU's plan table (a JSON file: see `compare/tune.py` for how it is made)."""

    def __init__(self, data: dict, path: str = "<memory>"):
        if data.get("format") != FORMAT or data.get("kind") != "tensorcore_hgemm plan table":
            raise HgemmValueError(f"not a plan table of format {FORMAT}")
        self.path = path
        self.device = dict(data["device"])
        self.arch, self.sms = int(self.device["arch"]), int(self.device["sms"])
        self.meta = {k: data.get(k) for k in ("versions", "commit", "date", "command")}
        self.entries: dict[str, Entry] = {}
        self.by_kind: dict[str, list[Entry]] = {}
        for key, e in data["entries"].items():
            cls = ShapeClass.from_key(key)
            kernels = {record_name(name): Config.from_name(c) for name, c in e.get("kernels", {}).items()}
            entry = Entry(cls, Plan.from_json(e["plan"]), kernels, shapes_of(e.get("shapes", []), key))
            self.entries[key] = entry
            self.by_kind.setdefault(cls.kind, []).append(entry)

    @classmethod
    def load(cls, path: Path) -> "Table":
        return cls(json.loads(Path(path).read_text()), str(path))

    def lookup(self, c: ShapeClass) -> tuple[Entry | None, int]:
        """The entry for class c and its distance in octaves: its own (0), else the nearest of its kind within
        NEAREST_OCTAVES (ties: the larger buckets, then table order); a bf16 or fp16-accumulation class with no
        entry of its kind borrows the fp16 / fp32-accumulation kind's (the tensor cores run those at one rate, and
        every configuration takes every dtype and accumulation). (None, -1) when nothing is near."""
        for kind in dict.fromkeys([c, replace(c, dtype="fp16"), replace(c, acc="fp32"),
                                   replace(c, dtype="fp16", acc="fp32")]):
            e = self.entries.get(kind.key)
            if e is not None:
                return e, 0
            near = [(kind.distance(x.cls), -(x.cls.m * x.cls.n * x.cls.k), i, x)
                    for i, x in enumerate(self.by_kind.get(kind.kind, ()))]
            near = [t for t in near if t[0] <= NEAREST_OCTAVES]
            if near:
                best = min(near, key=lambda t: t[:3])
                return best[3], best[0]
        return None, -1


_warned: set = set()
_warn_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


_tables: dict[tuple[int, int], Table | None] = {}
_tables_lock = threading.Lock()


def table_files() -> list[Path]:
    env = os.environ.get(TABLE_ENV)
    if env:
        return [Path(env)]
    return sorted(TABLE_DIR.glob("*.json"))


def table_for(arch: int, sms: int) -> Table | None:
    """The plan table for a GPU of compute capability `arch` (x10) with `sms` multiprocessors: the file named by
    TENSORCORE_HGEMM_PLAN_TABLE, else the shipped table whose device matches; None when none does. A file that
    cannot be read as a table is skipped with one warning."""
    key = (arch, sms)
    if key in _tables:
        return _tables[key]
    with _tables_lock:
        if key not in _tables:
            found = None
            for path in table_files():
                try:
                    t = Table.load(path)
                except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                    warn_once(f"table:{path}", f"ignoring plan table {path}: {type(e).__name__}: {e}")
                    continue
                if (t.arch, t.sms) == key:
                    found = t
                    break
            _tables[key] = found
    return _tables[key]


def clear_tables() -> None:
    """Forget the loaded tables (tests; after writing a new table in this process)."""
    with _tables_lock:
        _tables.clear()


# ----------------------------------------------------------------------------------------------------------------
# The heuristic: a GPU with no table, or a class far from every entry
# ----------------------------------------------------------------------------------------------------------------
def _first(configs: list[Config], **want) -> Config:
    for c in configs:
        if all(getattr(c, f) == v for f, v in want.items()):
            return c
    raise LookupError(f"no configuration with {want}")


def split_for(tiles: int, k: int, block_k: int, sms: int, splits: tuple[int, ...]) -> int:
    """The largest split of `splits` that keeps tiles x split within two rounds of the SMs and each slice at least
    two K tiles deep; the smallest split if none does."""
    fit = [s for s in splits if tiles * s <= 2 * sms and cdiv(k, s) >= 2 * block_k]
    return max(fit) if fit else min(splits)


def _splitk_config(module, m: int, n: int, k: int, sms: int) -> Config:
    """A split-K kernel's configuration by rule: 16-row tiles up to M = 16, 64-row up to M = 64, 128-row above; as
    many K slices as `split_for` allows."""
    from . import splitk

    block_m = 16 if m <= 16 else 64 if m <= 64 else 128
    tile = _first(module.configs(), block_m=block_m, split_k=splitk.SPLITS[0])
    tiles = cdiv(m, tile.block_m) * cdiv(n, tile.block_n)
    split = split_for(tiles, k, tile.block_k, sms, splitk.SPLITS)
    return _first(module.configs(), block_m=tile.block_m, block_n=tile.block_n, block_k=tile.block_k,
                  num_stages=tile.num_stages, split_k=split)


def _tiled_config(kernel: str, m: int, n: int, sms: int) -> Config:
    """The blocked or TMA kernel's configuration by rule: 128 x 256 tiles where they make at least one round of
    the SMs, else 128 x 128."""
    from . import blocked, tma_persistent

    big = cdiv(m, 128) * cdiv(n, 256) >= sms
    if kernel == "triton_tma":
        cfgs = tma_persistent.configs()
        return cfgs[0] if big else _first(cfgs, block_m=128, block_n=128, block_k=64, num_warps=8)
    cfgs = blocked.configs()
    return cfgs[0] if big else _first(cfgs, block_m=128, block_n=128, num_warps=4)


def heuristic(m: int, n: int, k: int, arch: int, sms: int, align: str) -> Plan:
    """kernel="auto" without a table entry, by rules and no timing:

    - M = 1 with K >= 256: the CUDA-core gemv kernel (one row of A, B streamed through registers);
    - an output whose 128 x 128 tiles leave SMs idle, with K >= 1024: split-K, on TMA loads where the GPU has
      TMA (sm_90+) and TMA reads A and B in place, else on pointer loads (`_splitk_config`);
    - sm_90+ with A, B and C readable by TMA in place: the persistent TMA kernel (`_tiled_config`);
    - anything else: the blocked kernel, tiles by the same rule.
    """
    from . import gemv, splitk, splitk_tma

    if m == 1 and k >= 256:
        return Plan("triton_gemv", gemv.configs()[0], source="heuristic")
    tma_ab = arch >= 90 and "-" not in align[:2]
    if cdiv(m, 128) * cdiv(n, 128) < sms and k >= 1024:
        module, kernel = (splitk_tma, "triton_splitk_tma") if tma_ab else (splitk, "triton_splitk")
        return Plan(kernel, _splitk_config(module, m, n, k, sms), source="heuristic")
    kernel = "triton_tma" if tma_ab and align[2] != "-" else "triton_blocked"
    return Plan(kernel, _tiled_config(kernel, m, n, sms), source="heuristic")


def heuristic_config(kernel: str, m: int, n: int, k: int, sms: int) -> Config:
    """An explicit kernel= call's configuration where neither the table nor the cost model names one, by the
    heuristic's rule for that kernel."""
    from . import gemv, splitk, splitk_tma

    if kernel == "triton_gemv":
        return gemv.configs()[0]
    if kernel in ("triton_splitk", "triton_splitk_tma"):
        return _splitk_config(splitk if kernel == "triton_splitk" else splitk_tma, m, n, k, sms)
    if kernel in ("triton_blocked", "triton_tma"):
        return _tiled_config(kernel, m, n, sms)
    from .common import problem_configs
    from .variants import BY_KERNEL, kernel_module

    module = kernel_module(BY_KERNEL[kernel])
    if hasattr(module, "choose_config"):  # a module with a rule of its own (gluon_persistent: tiles, split-K)
        return module.choose_config(m, n, k, sms)
    return problem_configs(module, m, n, k, sms)[0]


# ----------------------------------------------------------------------------------------------------------------
# The exact-plan cache (tune="exact")
# ----------------------------------------------------------------------------------------------------------------
def default_cache_path() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "tensorcore_hgemm" / "exact_plans.json"


_source_hash: list[str] = []


def source_hash() -> str:
    """sha256 of the Triton package's sources (kernels, their shared pieces, the dispatcher): a cached exact plan
    was timed on exactly these kernels."""
    if not _source_hash:
        h = hashlib.sha256()
        for p in sorted(Path(__file__).parent.glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
        _source_hash.append(h.hexdigest()[:16])
    return _source_hash[0]


def context(device: torch.device) -> dict:
    """What an exact plan is valid for: the GPU, the torch and Triton versions, the kernel sources."""
    props = torch.cuda.get_device_properties(device)
    return {"device": props.name, "arch": props.major * 10 + props.minor, "sms": props.multi_processor_count,
            "torch": torch.__version__, "triton": triton.__version__, "source": source_hash()}


def context_id(ctx: dict) -> str:
    return hashlib.sha256(json.dumps(ctx, sort_keys=True).encode()).hexdigest()[:16]


def exact_key(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, acc: str, kernel: str) -> str:
    """The exact facts a timed plan was chosen for: shapes, strides, dtype, the 16-byte alignment bits (as the
    call's key has them), out's facts, accumulation, the kernel= asked for."""
    def facts(t):
        return f"{tuple(t.shape)}{tuple(t.stride())}{int(t.data_ptr() % 16 == 0)}"
    o = "-" if out is None else facts(out)
    return f"{str(a.dtype).split('.')[-1]}|{facts(a)}|{facts(b)}|{o}|{acc}|{kernel}"


class ExactCache:
    """A JSON file of timed plans: {"format", "kind", "contexts": {context_id: {"context": {...}, "plans":
    {exact_key: plan}}}}. Reads never run code (JSON only, every plan validated on load). Writes take an exclusive
    lock on a sidecar file, read the file again, merge and replace it atomically (a temporary file in the same
    folder, fsync, os.replace): two processes writing at once keep both plans, and a reader sees the old or the
    new file, never half of one. A file that is not such a JSON object is set aside (renamed `.corrupt`) at the
    next write, after one warning; entries of other contexts (another GPU, torch or Triton version, kernel source)
    are kept in the file and never used."""

    KIND = "tensorcore_hgemm exact plans"

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self._mem: dict | None = None  # this process's view: context_id -> {exact_key: Plan}
        self._lock = threading.Lock()

    def _read(self) -> tuple[dict, bool]:
        """(contexts as stored, whether the file was unreadable as a cache)."""
        try:
            raw = self.path.read_text()
        except FileNotFoundError:
            return {}, False
        except OSError as e:
            warn_once(f"cache:{self.path}", f"ignoring plan cache {self.path}: {e}")
            return {}, True
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("kind") != self.KIND or data.get("format") != FORMAT:
                raise HgemmValueError(f"not a {self.KIND} file of format {FORMAT}")
            contexts = data["contexts"]
            if not isinstance(contexts, dict):
                raise HgemmValueError("contexts is not an object")
            return contexts, False
        except (ValueError, KeyError, TypeError) as e:
            warn_once(f"cache:{self.path}", f"ignoring plan cache {self.path}: {type(e).__name__}: {e} "
                      "(it will be renamed .corrupt at the next write)")
            return {}, True

    @staticmethod
    def _plans(stored: dict, cid: str) -> dict:
        out = {}
        entry = stored.get(cid)
        plans = entry.get("plans", {}) if isinstance(entry, dict) else {}
        for key, d in plans.items() if isinstance(plans, dict) else ():
            try:
                out[key] = Plan.from_json(d, source="exact")
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a plan this version cannot run (a renamed kernel or configuration): not used
        return out

    def get(self, ctx: dict, key: str) -> Plan | None:
        cid = context_id(ctx)
        with self._lock:
            if self._mem is None or cid not in self._mem:
                stored, _ = self._read()
                self._mem = self._mem or {}
                self._mem[cid] = self._plans(stored, cid)
            return self._mem[cid].get(key)

    def put(self, ctx: dict, key: str, plan: Plan) -> None:
        cid = context_id(ctx)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(str(self.path) + ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                stored, corrupt = self._read()
                if corrupt and self.path.exists():
                    os.replace(self.path, str(self.path) + ".corrupt")
                entry = stored.get(cid) if isinstance(stored.get(cid), dict) else None
                entry = entry or {"context": ctx, "plans": {}}
                if not isinstance(entry.get("plans"), dict):
                    entry["plans"] = {}
                entry["plans"][key] = plan.as_json()
                stored[cid] = entry
                data = {"format": FORMAT, "kind": self.KIND, "contexts": stored}
                fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
                try:
                    with os.fdopen(fd, "w") as f:
                        json.dump(data, f, indent=1, sort_keys=True)
                        f.flush()
                        os.fsync(f.fileno())
                    os.replace(tmp, self.path)
                except BaseException:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
                    raise
            self._mem = self._mem or {}
            self._mem.setdefault(cid, {})[key] = plan


_cache: list[ExactCache] = []


def exact_cache() -> ExactCache:
    """The process's exact-plan cache (its file: TENSORCORE_HGEMM_PLAN_CACHE, else the user's cache folder)."""
    path = default_cache_path()
    if not _cache or _cache[0].path != path:
        _cache[:] = [ExactCache(path)]
    return _cache[0]


def default_tune() -> str:
    value = os.environ.get(TUNE_ENV, "table") or "table"
    if value not in TUNES:
        raise HgemmValueError(f"{TUNE_ENV}={value!r}: must be one of {TUNES}")
    return value
