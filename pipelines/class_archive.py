"""A class-data-sharing (CDS) archive of Spark's classes for local sessions.

A local session's JVM spends most of its start-up CPU loading and verifying Spark's classes. A JVM
started with ``-XX:SharedArchiveFile`` maps the classes an earlier JVM archived instead, which about
halves the CPU of starting a session and running its first job (``bench/pipeline/bench_throughput.py``, cold).

The archive is made once per installation (JDK, Spark jars) and kept in the user's cache:
1. the first local session's JVM writes it when it exits (``-XX:ArchiveClassesAtExit``) under a
   temporary name, beside a note of its class path;
2. a later session, once the archive has not changed for ``SETTLE_S``, checks it with a throw-away JVM
   that must map it (``-Xshare:on``; a truncated archive crashes the JVM that maps it, even with the
   default ``-Xshare:auto``: that JVM, not the session's) and renames it into place;
3. every session after that maps it.
A session never points its JVM at an archive that was not checked. Sessions on cluster masters are
left alone. ``CCPRETRAIN_CLASS_ARCHIVE=off`` turns this off; a directory there moves the cache.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import shutil
import subprocess
import time
import uuid

from dataprep.core.storage import atomic_write_text

ENV = "CCPRETRAIN_CLASS_ARCHIVE"
# A session that started writing an archive this recently may still be running: others wait for it.
WRITE_GRACE_S = 600
# An archive written to this recently may be unfinished: it is checked on a later start.
SETTLE_S = 30
# A note whose session never wrote its archive (killed, or still running after this long) is dropped.
STALE_NOTE_S = 86_400
# The JVM's CDS messages (signed jars skipped, old class versions) are notes, not problems of the job.
QUIET = "-Xlog:cds*=off"

log = logging.getLogger(__name__)


def cache_dir() -> str | None:
    """Where archives are kept, or None when turned off."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() in ("off", "0", "false", "no"):
        return None
    return chosen or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ccpretrain", "jvm"
    )


def _java() -> str | None:
    """The java binary spark-submit will run (JAVA_HOME's, else the one on PATH)."""
    java_home = os.environ.get("JAVA_HOME")
    found = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.isfile(found) else None


def _spark_jars() -> str | None:
    from pyspark.find_spark_home import _find_spark_home

    jars = os.path.join(_find_spark_home(), "jars")
    return os.path.realpath(jars) if os.path.isdir(jars) else None


def archive_path(directory: str, java: str, jars: str) -> str:
    """One archive per JDK binary and set of Spark jars (an upgrade of either makes a new one)."""
    identity = f"{java}:{os.stat(java).st_mtime_ns}:{jars}:{os.stat(jars).st_mtime_ns}"
    return os.path.join(directory, f"spark-{hashlib.sha1(identity.encode()).hexdigest()[:16]}.jsa")


def java_options() -> tuple[str, str | None]:
    """JVM options for a new local session, and the class-path note to write once its JVM runs
    (when this session is the one writing the archive; else None)."""
    directory, java, jars = cache_dir(), _java(), _spark_jars()
    if not (directory and java and jars):
        return "", None
    try:
        os.makedirs(directory, exist_ok=True)
        final = archive_path(directory, java, jars)
        if os.path.exists(final) or _adopt_written(final, java):
            return f"-XX:SharedArchiveFile={final} {QUIET}", None
        notes = glob.glob(final + ".*.classpath")
        if any(time.time() - os.path.getmtime(n) < WRITE_GRACE_S for n in notes):
            return "", None  # another session is making it
        pending = f"{final}.{uuid.uuid4().hex[:12]}"
        atomic_write_text(pending + ".classpath", "")  # marks the attempt until its JVM tells the class path
        return f"-XX:ArchiveClassesAtExit={pending} {QUIET}", pending + ".classpath"
    except OSError as exc:  # a read-only or full cache: sessions run as they would without it
        log.debug("class archive skipped: %s", exc)
        return "", None


def record_class_path(note: str, class_path: str) -> None:
    """Written by the session that makes the archive, once its JVM runs: the checker needs its class path."""
    try:
        atomic_write_text(note, class_path)
    except OSError as exc:
        log.debug("class archive note not written: %s", exc)


def _adopt_written(final: str, java: str) -> bool:
    """Check the archives earlier sessions wrote and move the first good one into place; remove the
    ones that fail (a JVM killed while writing) once their writers are surely gone."""
    notes = sorted(glob.glob(final + ".*.classpath"), key=os.path.getmtime)
    for orphan in set(glob.glob(final + ".*")) - set(notes) - {n.removesuffix(".classpath") for n in notes}:
        if time.time() - os.path.getmtime(orphan) > WRITE_GRACE_S:
            os.remove(orphan)
    for note in notes:
        pending = note.removesuffix(".classpath")
        with open(note, encoding="utf-8") as fh:
            class_path = fh.read()
        if not (class_path and os.path.exists(pending)):
            if time.time() - os.path.getmtime(note) > STALE_NOTE_S:  # its session never finished
                os.remove(note)
            continue
        if time.time() - os.path.getmtime(pending) < SETTLE_S:  # its JVM may still be writing it
            continue
        if _maps(java, pending, class_path):
            os.replace(pending, final)
            os.remove(note)
            log.info("JVM class archive ready: %s", final)
            return True
        if time.time() - os.path.getmtime(pending) > WRITE_GRACE_S:
            for path in (pending, note):
                os.remove(path)
    return False


def _maps(java: str, archive: str, class_path: str) -> bool:
    """Whether a JVM can map ``archive`` for this class path (it must, with -Xshare:on)."""
    command = [java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-XX:ErrorFile=/dev/null",
               "-XX:-CreateCoredumpOnCrash", QUIET, "-cp", class_path, "-version"]  # fmt: skip
    try:
        return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
