"""A Spark standalone cluster (one master, N workers) started from the installed pyspark, for trying
cluster mode on one machine and for the cluster tests.

pyspark's wheel ships ``bin/spark-class`` but not ``sbin/start-master.sh``, so the daemons are
launched directly: ``spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker``.
Each daemon gets its own process group, so stopping (or killing) a worker also ends the executor
and Python processes it spawned, as when a node is lost. State (pids, ports, URLs) is kept in
``STATE_DIR/cluster.json`` so ``stop`` works from another process.

    python -m pipelines.cluster start --dir /tmp/sparkc --workers 2   # prints the master URL
    python -m pipelines.cluster status --dir /tmp/sparkc
    python -m pipelines.cluster stop --dir /tmp/sparkc

Across machines (``scripts/slurm_pipeline.sbatch``): ``start --workers 0 --host HEAD`` starts the master
alone, ``worker --master URL`` runs one worker in the foreground on each node (under ``srun``), and
``wait --workers N`` returns once N have registered.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field, fields
from pathlib import Path

from dataprep.core.errors import MissingPath
from dataprep.core.storage import atomic_write_text

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"


def spark_home() -> Path:
    """$SPARK_HOME, else the Spark distribution inside the pyspark package."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_spark_daemon(pid: int) -> bool:
    try:
        cmd = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return False
    return "org.apache.spark.deploy." in cmd


def _wait_log(log: Path, pattern: str, proc: subprocess.Popen | None, timeout: float) -> re.Match:
    """Wait for ``pattern`` in a daemon's log; fail with the log tail if it dies or times out."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        match = re.search(pattern, text)
        if match:
            return match
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{log.name}: daemon exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"{log.name}: no {pattern!r} after {timeout:.0f}s:\n{text[-3000:]}")


@dataclass
class StandaloneCluster:
    """Master + ``workers`` workers on ``host``; use as a context manager or call start()/stop()."""

    state_dir: str
    workers: int = 2
    cores: int = 1  # per worker
    memory: str = "2g"  # per worker: what executors on it may take in total
    host: str = "127.0.0.1"
    master_url: str = ""
    webui_url: str = ""
    pids: dict[str, int] = field(default_factory=dict)  # "master", "worker-0", ... -> pid
    _procs: dict = field(default_factory=dict, init=False, repr=False)  # name -> Popen (this process only)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 180) -> "StandaloneCluster":
        state = Path(self.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        try:
            self._launch(
                "master",
                [
                    MASTER_CLASS,
                    "--host",
                    self.host,
                    "--port",
                    str(free_port(self.host)),
                    "--webui-port",
                    str(free_port(self.host)),
                ],
            )
            log = state / "master.log"
            self.master_url = _wait_log(log, r"Starting Spark master at (spark://\S+)", self._procs["master"], timeout)[
                1
            ]
            self.webui_url = _wait_log(log, r"started at (http://\S+)", self._procs["master"], timeout)[1]
            self._save()  # the URLs, for `wait`/`status`/`stop` from other processes (also with no workers)
            for i in range(self.workers):
                work_dir = state / f"worker-{i}"
                work_dir.mkdir(exist_ok=True)
                self._launch(
                    f"worker-{i}",
                    [
                        WORKER_CLASS,
                        "--host",
                        self.host,
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(work_dir),
                        "--webui-port",
                        str(free_port(self.host)),
                        self.master_url,
                    ],
                )
            self.wait_for_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, args: list[str]) -> None:
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": self.host}
        # No REST submission server: it always takes port 6066, which a second cluster cannot have.
        env["SPARK_MASTER_OPTS"] = (env.get("SPARK_MASTER_OPTS", "") + " -Dspark.master.rest.enabled=false").strip()
        log = open(Path(self.state_dir) / f"{name}.log", "wb")  # fresh: start() parses it for ports
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # own process group: executors and Python workers join it
        )
        log.close()
        self._procs[name] = proc
        self.pids[name] = proc.pid
        self._save()

    def stop(self, timeout: float = 20) -> None:
        """Stop every daemon this cluster started (workers first), with their executors."""
        for name in sorted(self.pids, key=lambda n: n == "master"):
            self._signal(name, signal.SIGTERM)
        deadline = time.time() + timeout
        for name in list(self.pids):
            while self._running(name) and time.time() < deadline:
                time.sleep(0.1)
            self._signal(name, signal.SIGKILL)  # the group: leftover executors / Python workers
            self._running(name)
        self.pids.clear()
        self._save()

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> int:
        """Kill worker ``index`` and everything it spawned, as if its node died; returns its pid."""
        name = f"worker-{index}"
        pid = self.pids[name]
        self._signal(name, sig)
        return pid

    def _signal(self, name: str, sig: int) -> None:
        if name not in self._procs and not _is_spark_daemon(self.pids[name]):
            return  # loaded from state and long gone: the pid may belong to someone else now
        try:
            os.killpg(self.pids[name], sig)  # pgid == pid: started with start_new_session
        except (ProcessLookupError, PermissionError):
            pass

    def _running(self, name: str) -> bool:
        proc = self._procs.get(name)
        if proc is not None:
            return proc.poll() is None  # also reaps it
        return _alive(self.pids[name])

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- state ----------------------------------------------------------------------------------

    def status(self) -> dict:
        """The master's JSON view: workers (state, cores used), running and completed applications."""
        with urllib.request.urlopen(self.webui_url.rstrip("/") + "/json/", timeout=10) as resp:
            return json.loads(resp.read())

    def wait_for_workers(self, count: int, timeout: float = 180) -> dict:
        deadline = time.time() + timeout
        while True:
            try:
                status = self.status()
                if status.get("aliveworkers", 0) >= count:
                    return status
            except OSError:
                status = {}
            dead = [n for n in self.pids if not self._running(n)]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited; see the logs in {self.state_dir}")
            if time.time() > deadline:
                raise TimeoutError(
                    f"{status.get('aliveworkers', 0)} of {count} workers registered after {timeout:.0f}s; "
                    f"logs in {self.state_dir}"
                )
            time.sleep(0.3)

    def _save(self) -> None:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        atomic_write_text(str(Path(self.state_dir) / STATE_FILE), json.dumps(data, indent=1))

    @classmethod
    def load(cls, state_dir: str) -> "StandaloneCluster":
        path = Path(state_dir) / STATE_FILE
        if not path.exists():
            raise MissingPath(f"no cluster state in {state_dir} (nothing started there)")
        return cls(**json.loads(path.read_text()))


def run_worker(master_url: str, state_dir: str, cores: int, memory: str, host: str) -> int:
    """One worker in the foreground (it becomes this process), for a scheduler that runs one per node
    and ends it at the end of the job. Its work dir is ``state_dir/worker-HOST``."""
    work_dir = Path(state_dir) / f"worker-{host}"
    work_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=host)
    spark_class = str(spark_home() / "bin" / "spark-class")
    os.execv(
        spark_class,
        [
            spark_class,
            WORKER_CLASS,
            "--host",
            host,
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--work-dir",
            str(work_dir),
            master_url,
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop", "status", "worker", "wait"])
    parser.add_argument(
        "--dir",
        default=os.environ.get("CCP_CLUSTER_DIR", "/tmp/ccpretrain-spark-cluster"),
        help="state directory: pids, logs, worker work dirs",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="2g", help="memory per worker (executors on it share this)")
    parser.add_argument(
        "--host", default=None, help="address to bind (start: 127.0.0.1; worker: SPARK_LOCAL_IP, else this host's name)"
    )
    parser.add_argument("--master", help="worker: the master URL to join")
    parser.add_argument("--timeout", type=float, default=300, help="wait: seconds before giving up")
    args = parser.parse_args(argv)
    if args.action == "worker":
        if not args.master:
            parser.error("worker needs --master spark://HOST:PORT")
        return run_worker(
            args.master,
            args.dir,
            args.cores,
            args.memory,
            args.host or os.environ.get("SPARK_LOCAL_IP") or socket.gethostname(),
        )
    args.host = args.host or "127.0.0.1"
    if args.action == "start":
        path = Path(args.dir) / STATE_FILE
        if path.exists() and StandaloneCluster.load(args.dir).pids:
            parser.error(f"a cluster is already running from {args.dir}; stop it first")
        cluster = StandaloneCluster(args.dir, args.workers, args.cores, args.memory, args.host).start()
        print(f"master {cluster.master_url}  (web UI {cluster.webui_url}, {args.workers} workers, logs in {args.dir})")
        print(cluster.master_url)
        return 0
    try:
        cluster = StandaloneCluster.load(args.dir)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    if not cluster.pids:
        print(f"no cluster running from {args.dir}", file=sys.stderr)
        return 1
    if args.action == "wait":
        status = cluster.wait_for_workers(args.workers, args.timeout)
        print(f"{cluster.master_url}: {status['aliveworkers']} workers, {status['cores']} cores")
        return 0
    if args.action == "stop":
        cluster.stop()
        print(f"stopped the cluster of {args.dir}")
        return 0
    try:
        status = cluster.status()
    except OSError as exc:
        print(f"master at {cluster.webui_url} not answering: {exc}", file=sys.stderr)
        return 1
    alive = [w for w in status["workers"] if w["state"] == "ALIVE"]
    print(
        f"{cluster.master_url}: {len(alive)} alive workers, {status['coresused']}/{status['cores']} cores used, "
        f"{len(status['activeapps'])} running apps, {len(status['completedapps'])} completed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
