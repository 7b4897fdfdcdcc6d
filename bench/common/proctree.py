"""CPU seconds and peak memory of a process tree, read from /proc (no dependencies, so it also runs in
.venv-datatrove). Spark in local mode is the driver, its JVM (the executor) and the Python workers.

CPU counts each live process's own time plus the time of the children it has reaped (utime + stime +
cutime + cstime), so workers that exit between two polls are still counted, in their parent; once
the root has exited, its last sample stands (up to one polling interval short). The monitor's own
polling thread is left out when it runs inside the measured tree."""

from __future__ import annotations

import os
import threading
import time

_TICK = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except OSError:
                continue
    return parents


def _tree(root: int) -> list[int]:
    parents = _children()
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parents.items() if pp in frontier]
        tree += frontier
    return tree


def _sample(pid: int) -> tuple[str, float, int, int] | None:
    """(kind, cpu seconds, rss kB, peak rss kB) of one process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            head, rest = fh.read().rsplit(")", 1)
        fields = rest.split()
        cpu = sum(int(f) for f in fields[11:15]) / _TICK  # utime, stime, cutime, cstime
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        rss = int(status.get("VmRSS", "0 kB").split()[0])
        peak = int(status.get("VmHWM", "0 kB").split()[0])
        kind = "jvm" if "java" in head else "python"
        return kind, cpu, rss, peak
    except (OSError, ValueError, IndexError):
        return None


def _command(pid: int) -> str:
    """The first words of a process's command line (which Python process had the peak)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return " ".join(a.decode(errors="replace").rsplit("/", 1)[-1] for a in fh.read().split(b"\0")[:4])[:120]
    except OSError:
        return ""


class TreeMonitor:
    """Polls the tree under ``root`` (default: this process); ``stop()`` returns CPU seconds used since
    ``start()``, the peak RSS of the largest JVM and Python process, and the peak RSS of the whole tree."""

    def __init__(self, root: int | None = None, interval: float = 0.25):
        self.root, self.interval = root or os.getpid(), interval
        self._stop = threading.Event()
        self._cpu0: dict[int, float] = {}
        self._cpu: dict[int, float] = {}
        self._kind: dict[int, str] = {}
        self._own_thread_cpu = 0.0
        self._peak = {"jvm": 0, "python": 0}
        self._peak_cmd = {"jvm": "", "python": ""}
        self._tree_peak = 0

    def _poll(self) -> None:
        total, live = 0, {}
        for pid in _tree(self.root):
            s = _sample(pid)
            if s is None:
                continue
            kind, cpu, rss, peak = s
            if self._first:
                self._cpu0[pid] = cpu
            live[pid] = cpu
            self._kind[pid] = kind
            if peak > self._peak[kind]:
                self._peak[kind] = peak
                self._peak_cmd[kind] = _command(pid)
            total += rss
        self._tree_peak = max(self._tree_peak, total)
        if self.root in live or not self._cpu:  # exited processes' time is now in their parents' cutime;
            self._cpu = live  # once the root itself has exited, its last sample stands

    def _loop(self) -> None:
        t0 = time.thread_time()
        while not self._stop.wait(self.interval):
            self._poll()
            self._own_thread_cpu = time.thread_time() - t0

    def start(self) -> "TreeMonitor":
        self._first = True
        self._poll()
        self._first = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def cpu_by_kind(self) -> dict[str, float]:
        """CPU seconds used since ``start()`` by the tree's JVMs and its Python processes."""
        self._poll()
        used = {"jvm": 0.0, "python": 0.0}
        for pid, cpu in self._cpu.items():
            used[self._kind[pid]] += cpu
        for pid, cpu in self._cpu0.items():
            used[self._kind[pid]] -= cpu
        if self.root == os.getpid():
            used["python"] -= self._own_thread_cpu
        return used

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        used = self.cpu_by_kind()
        return {
            "cpu_seconds": round(sum(used.values()), 1),
            "cpu_seconds_jvm": round(used["jvm"], 1),
            "cpu_seconds_python": round(used["python"], 1),
            "peak_rss_mb_jvm": round(self._peak["jvm"] / 1024),
            "peak_rss_mb_python": round(self._peak["python"] / 1024),
            "peak_rss_mb_tree": round(self._tree_peak / 1024),
            "peak_python_process": self._peak_cmd["python"],
        }
