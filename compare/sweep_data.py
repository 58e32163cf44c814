"""The data file of timed candidates that `python -m compare sweep` and `python -m compare tune` append to and
`python -m compare sweep --fit` reads: JSON lines, one record each.

Its records (`read` parses them, skipping a truncated last line):
- {"type": "run", "run", "environment", "frame", "args"}: one per run;
- {"type": "start", "run", "case"}: before a case is measured;
- {"type": "candidate", "run", "case", "seed", "index", "side": "triton" | "auto" | "ptx", "call" (what was
  called), "problem", "plan" (the cost model's Problem and Plan), "status", "detail", "ms" (median device time),
  "spread_pct", "samples", "wall_us", "torch_ms", "x_torch"}: one per candidate of a case;
- {"type": "case", "run", "case", "seed", "index", "problem", "status", "torch_ms", "control_ratio", "auto",
  "candidates", "timed", "seconds"}: a case done;
- {"type": "end", "run", "cases", "stopped", "during_run"}: a run's end.
`python -m compare tune` writes its per-candidate times as candidate records too (`tune_records`: side "triton",
source "tune"), so `--fit` reads both.
"""
from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hgemm_common import cost_model as cm


# ----------------------------------------------------------------------------------------------------------------
# The data file
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Data:
    runs: list = field(default_factory=list)
    cases: dict = field(default_factory=dict)  # case key -> its case record
    candidates: list = field(default_factory=list)
    starts: Counter = field(default_factory=Counter)  # case key -> starts recorded
    bad_lines: int = 0  # lines that are not JSON objects (a run killed mid-write leaves at most one)


def read(path: Path) -> Data:
    """A data file's records by type (a committed one may be gzipped: name ending .gz); a missing file reads as
    empty."""
    data = Data()
    try:
        raw = Path(path).read_bytes()
        lines = (gzip.decompress(raw) if str(path).endswith(".gz") else raw).decode().splitlines()
    except FileNotFoundError:
        return data
    for line in lines:
        try:
            rec = json.loads(line)
            kind = rec["type"]
        except (ValueError, KeyError, TypeError):
            data.bad_lines += 1
            continue
        if kind == "run":
            data.runs.append(rec)
        elif kind == "case":
            data.cases[rec["case"]] = rec
        elif kind == "candidate":
            data.candidates.append(rec)
        elif kind == "start":
            data.starts[rec["case"]] += 1
    return data


def append(path: Path, records: list[dict]) -> None:
    """The records appended as one write (a process killed during it leaves at most a truncated last line, which
    `read` skips and the next append cuts off first), flushed to the disk."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a truncated last line: cut back to the last newline
            tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            keep = size - len(tail) + tail.rfind(b"\n") + 1
            os.ftruncate(fd, keep)
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, text)
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------------------------
# Records of Triton plans
# ----------------------------------------------------------------------------------------------------------------
# compare tune's per-candidate times, as candidate records
def tune_records(timed: list, a: torch.Tensor, b: torch.Tensor, dtype: str, acc: str, layout: str,
                 case: str) -> list[dict]:
    """Candidate records of the (kernel, stage, configuration, ms) `compare tune` timed on one case's operands
    (`triton_kernels.dispatch.kept_timings`)."""
    from triton_kernels.plan_table import align_class, stage_text
    from triton_kernels.planner import model_plan_of

    m, k = a.shape
    n = b.shape[1]
    problem = cm.Problem(m, n, k, layout, align_class(a, b, None), dtype, acc)
    return [{"type": "candidate", "case": case, "side": "triton", "source": "tune",
             "call": {"kernel": kern, "config": cfg.name, "stage": stage_text(stage)},
             **cm.record_fields(problem, model_plan_of(kern, cfg, stage, k)), "status": "ok", "ms": ms}
            for kern, stage, cfg, ms in timed]
