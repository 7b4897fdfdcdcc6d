"""The JVM class archive of local sessions: made once, checked by a throw-away JVM before any session
maps it (a truncated archive crashes the JVM that maps it), then used; off when asked."""

from __future__ import annotations

import os
import subprocess

import pytest

from pipelines import class_archive


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.ENV, str(tmp_path))
    java = class_archive._java()
    if java is None:
        pytest.skip("no java")
    return tmp_path


def _write_archive(path: str, class_path: str) -> None:
    """A small real archive: the classes a JVM loads to print its version."""
    java = class_archive._java()
    subprocess.run(
        [java, f"-XX:ArchiveClassesAtExit={path}", class_archive.QUIET, "-cp", class_path, "-version"],
        check=True,
        capture_output=True,
    )


def test_first_session_writes_the_archive_others_wait_then_use_it(cache, monkeypatch):
    options, note = class_archive.java_options()
    assert "-XX:ArchiveClassesAtExit=" in options and note and os.path.exists(note)
    pending = options.split("ArchiveClassesAtExit=")[1].split()[0]
    assert class_archive.java_options() == ("", None)  # the first session is still making it
    class_path = os.path.join(class_archive._spark_jars(), "*")
    _write_archive(pending, class_path)
    class_archive.record_class_path(note, class_path)  # what the first session does once its JVM runs
    assert class_archive.java_options() == ("", None)  # just written: its JVM may still be writing it
    monkeypatch.setattr(class_archive, "SETTLE_S", 0)
    options, note = class_archive.java_options()
    final = class_archive.archive_path(str(cache), class_archive._java(), class_archive._spark_jars())
    assert options == f"-XX:SharedArchiveFile={final} {class_archive.QUIET}" and note is None
    assert sorted(os.listdir(cache)) == [os.path.basename(final)]  # checked, renamed, note removed


def test_a_truncated_archive_is_never_used(cache, monkeypatch):
    options, note = class_archive.java_options()
    pending = options.split("ArchiveClassesAtExit=")[1].split()[0]
    class_path = os.path.join(class_archive._spark_jars(), "*")
    _write_archive(pending, class_path)
    with open(pending, "rb") as fh:
        head = fh.read(4096)
    os.chmod(pending, 0o644)
    with open(pending, "wb") as fh:  # a JVM killed while writing
        fh.write(head)
    class_archive.record_class_path(note, class_path)
    monkeypatch.setattr(class_archive, "WRITE_GRACE_S", 3600)
    monkeypatch.setattr(class_archive, "SETTLE_S", 0)
    assert class_archive.java_options() == ("", None)  # not used; its writer may still be busy
    assert os.path.exists(pending)
    monkeypatch.setattr(class_archive, "WRITE_GRACE_S", 0)
    options, _ = class_archive.java_options()  # writer surely gone: removed, and a new attempt starts
    assert not os.path.exists(pending) and "-XX:ArchiveClassesAtExit=" in options


def test_a_cache_turned_off_changes_nothing(monkeypatch):
    monkeypatch.setenv(class_archive.ENV, "off")
    assert class_archive.java_options() == ("", None)


def test_an_unwritable_cache_changes_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(class_archive.ENV, str(blocker / "jvm"))  # under a file: cannot be made
    assert class_archive.java_options() == ("", None)
