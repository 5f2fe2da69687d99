"""A command's processes, read from /proc: its children, whether one lives, waiting for them to go."""

from __future__ import annotations

import os
import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, only not yet reaped


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    """The pids still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]
