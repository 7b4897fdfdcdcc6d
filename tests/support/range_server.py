"""A small HTTP server on 127.0.0.1 serving a folder with Range requests (``http.server`` has none).

Shared by the remote-shard tests and ``bench/data/bench_remote.py``: ``fail_every`` answers every n-th
request with 503, ``latency_s`` delays each answer, as an object store far away would.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

RANGE = re.compile(r"bytes=(\d+)-(\d*)")


class RangeServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops connections under concurrent read-ahead: 1 s SYN retries

    def __init__(self, root: str, fail_every: int = 0, latency_s: float = 0.0):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.root, self.fail_every, self.latency_s = root, fail_every, latency_s
        self.requests = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up early (HEAD, then GET)
            super().handle_error(request, client_address)

    def count_request(self) -> bool:
        """Count a request; True when this one must fail transiently."""
        with self._lock:
            self.requests += 1
            return bool(self.fail_every) and self.requests % self.fail_every == 0


class RangeHandler(BaseHTTPRequestHandler):
    server: RangeServer

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def _answer(self, with_body: bool) -> None:
        time.sleep(self.server.latency_s)
        if self.server.count_request():
            self.send_error(503, "injected transient failure")
            return
        path = os.path.join(self.server.root, unquote(urlparse(self.path).path).lstrip("/"))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        size = os.path.getsize(path)
        start, end = self._range(size)
        if start >= max(size, 1):
            self.send_error(416)
            return
        self.send_response(206 if "Range" in self.headers else 200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        if "Range" in self.headers:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if with_body:
            with open(path, "rb") as fh:
                fh.seek(start)
                self.wfile.write(fh.read(end - start))

    def _range(self, size: int) -> tuple[int, int]:
        match = RANGE.fullmatch(self.headers.get("Range", ""))
        if not match:
            return 0, size
        start = int(match[1])
        return start, min(int(match[2]) + 1, size) if match[2] else size


@contextmanager
def serve_folder(root: str, fail_every: int = 0, latency_s: float = 0.0):
    """A running ``RangeServer`` over ``root``; stopped on exit."""
    server = RangeServer(str(root), fail_every, latency_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
