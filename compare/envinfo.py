"""What to record with every result: the machine, the software, the commit, the command."""
from __future__ import annotations

import datetime as _dt
import platform
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def git_commit() -> str:
    """HEAD (with '+dirty'), or $HGEMM_GIT_COMMIT where the tree is a copy without .git (a lent GPU machine)."""
    import os

    if os.environ.get("HGEMM_GIT_COMMIT"):
        return os.environ["HGEMM_GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha or "unknown") + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _smi(query: str) -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return [x.strip() for x in out.split(",")] if out else []
    except (OSError, subprocess.SubprocessError):
        return []


def environment() -> dict:
    import triton

    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python -m compare", *(shlex.quote(x) for x in sys.argv[1:])]),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_runtime": torch.version.cuda,
        "host": platform.node(),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, sm_count=p.multi_processor_count, capability=f"{p.major}.{p.minor}",
                    l2_mb=round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
                    memory_gb=round(p.total_memory / 2**30, 1))
        smi = _smi("driver_version,power.limit,clocks.max.sm")
        if len(smi) == 3:
            info.update(driver=smi[0], power_limit_w=smi[1], max_sm_clock_mhz=smi[2])
    else:
        info.update(gpu=None)
    return info


class Sampler:
    """Samples SM clock, power and temperature with nvidia-smi every `period` s while a run is under way."""

    def __init__(self, period: float = 1.0):
        self.period, self.samples = period, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            v = _smi("clocks.sm,power.draw,temperature.gpu")
            if len(v) == 3:
                try:
                    self.samples.append(tuple(float(x) for x in v))
                except ValueError:
                    pass
            self._stop.wait(self.period)

    def __enter__(self):
        if torch.cuda.is_available():
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def summary(self) -> dict:
        if not self.samples:
            return {}
        cols = list(zip(*self.samples))
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        return {"sm_clock_mhz_median": med(cols[0]), "sm_clock_mhz_min": min(cols[0]),
                "power_w_median": med(cols[1]), "power_w_max": max(cols[1]), "temp_c_max": max(cols[2]),
                "samples": len(self.samples)}
