"""``pretrain ablate`` end to end on real text: real documents beat the same documents with their words
shuffled, the same corpus as both arms shows no difference, a rerun redoes only unscored models, and
arms under two tokenizers are refused."""

from __future__ import annotations

import gzip
import json
import random
import shutil

import pytest

from harness_tasks import write_tasks
from pretrain.cli import main as pretrain_main

pytestmark = pytest.mark.slow  # many trainings: scripts/test.sh --fast leaves it out

SMALL = ["--seq-len", "64", "--batch-size", "8", "--micro-batch", "8", "--lr", "1e-2"]


def _write(path, texts) -> str:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def corpora(shared_data, tmp_path_factory):
    """Twenty web documents, the same with each document's words shuffled, and ten others held out."""
    folder = tmp_path_factory.mktemp("ablate")
    docs = shared_data / "documents"
    real = [json.loads(line)["text"] for line in (docs / "redpajama-cc-2023-06-refined.jsonl").open(encoding="utf-8")]
    with gzip.open(docs / "dolma-cc_en_head-0091.jsonl.gz", "rt", encoding="utf-8") as fh:
        real += [json.loads(line)["text"] for line in fh]
    with gzip.open(docs / "dolma-cc_en_head-0174.jsonl.gz", "rt", encoding="utf-8") as fh:
        held_out = [json.loads(line)["text"] for line in fh]
    rng = random.Random(0)
    shuffled = [" ".join(rng.sample(t.split(), len(t.split()))) for t in real]
    return {
        "real": _write(folder / "real.jsonl", real),
        "shuffled": _write(folder / "shuffled.jsonl", shuffled),
        "held_out": _write(folder / "held_out.jsonl", held_out),
        "folder": folder,
    }


@pytest.fixture(scope="module")
def real_vs_shuffled(corpora):
    import torch

    out = corpora["folder"] / "real-vs-shuffled"
    argv = [
        "ablate",
        "--arm",
        f"real={corpora['real']}",
        "--arm",
        f"shuffled={corpora['shuffled']}",
        "--eval",
        corpora["held_out"],
        "--seeds",
        "4",
        "--output",
        str(out),
    ]  # the defaults, 4 seeds
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices on a busy machine
    try:
        assert pretrain_main([*argv, "--json"]) == 0
    finally:
        torch.set_num_threads(threads)
    return out, argv


@pytest.mark.usefixtures("one_torch_thread")
def test_real_text_beats_its_shuffled_words(real_vs_shuffled):
    out, _ = real_vs_shuffled
    results = json.loads((out / "results.json").read_text())
    (pair,) = results["pairs"]
    assert (pair["a"], pair["b"], pair["measure"]) == ("real", "shuffled", "held_out/bpb")
    assert pair["ci95"][1] < 0 and pair["winner"] == "real", pair
    assert results["arms"]["real"]["held_out/bpb"]["mean"] < results["arms"]["shuffled"]["held_out/bpb"]["mean"]
    assert len(results["arms"]["real"]["held_out/bpb"]["values"]) == 4
    assert 'src="ablation.png"' in (out / "index.html").read_text() and (out / "ablation.png").stat().st_size > 0


@pytest.mark.usefixtures("one_torch_thread")
def test_a_rerun_redoes_only_unscored_models(real_vs_shuffled, capsys):
    out, argv = real_vs_shuffled
    before = json.loads((out / "results.json").read_text())
    (out / "models" / "shuffled-seed1" / "scores.json").unlink()
    scored = out / "models" / "real-seed0" / "scores.json"
    mtime = scored.stat().st_mtime_ns
    capsys.readouterr()
    assert pretrain_main(argv) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("[ablate] model ") and "done" not in line] == [
        "[ablate] model 4/8: arm shuffled, seed 1"
    ]
    assert scored.stat().st_mtime_ns == mtime
    after = json.loads((out / "results.json").read_text())
    assert after["pairs"][0]["difference"] == pytest.approx(before["pairs"][0]["difference"], abs=1e-6)
    assert pretrain_main([*argv, "--seeds", "5"]) != 0
    assert "holds an ablation with other settings (seeds)" in capsys.readouterr().err


@pytest.mark.usefixtures("one_torch_thread")
def test_the_same_corpus_twice_shows_no_difference(real_vs_shuffled, corpora, capsys):
    shards = real_vs_shuffled[0] / "arms" / "real" / "shards"  # token shards: the tokenizer comes with them
    out = corpora["folder"] / "same"
    tasks = write_tasks(corpora["folder"] / "tasks")
    assert (
        pretrain_main(
            [
                "ablate",
                "--arm",
                f"a={shards}",
                "--arm",
                f"b={shards}",
                "--eval",
                corpora["held_out"],
                "--seeds",
                "2",
                "--tokens",
                "30000",
                *SMALL,
                "--tasks",
                "tiny_mc",
                "--include-path",
                tasks,
                "--output",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    pairs = {p["measure"]: p for p in json.loads(capsys.readouterr().out)["pairs"]}
    assert set(pairs) == {"held_out/bpb", "tiny_mc/acc", "tiny_mc/correct_prob"}
    pair = pairs["held_out/bpb"]
    assert pair["ci95"][0] < 0 < pair["ci95"][1] and pair["winner"] is None, pair
    assert pair["difference"] != 0  # the two arms drew their data in different orders
    arms = json.loads((out / "results.json").read_text())["arms"]
    assert all(0 < v < 1 for arm in arms.values() for v in arm["tiny_mc/correct_prob"]["values"])


def test_shard_arms_under_different_tokenizers_are_refused(real_vs_shuffled, corpora, capsys):
    shards = real_vs_shuffled[0] / "arms" / "real" / "shards"
    other = corpora["folder"] / "other-shards"
    shutil.copytree(shards, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["tokenizer"]["model_sha256"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert (
        pretrain_main(
            [
                "ablate",
                "--arm",
                f"a={shards}",
                "--arm",
                f"b={other}",
                "--eval",
                corpora["held_out"],
                "--output",
                str(corpora["folder"] / "refused"),
            ]
        )
        != 0
    )
    err = capsys.readouterr().err
    assert "the token-shard arms use different tokenizers" in err and len(err.strip().splitlines()) == 1
