"""Budgets that know the corpus: data-constrained scaling, the loss fits, inference-aware sizing.

Expected values are computed here from the papers' formulas, or are the figures their authors publish:
- Muennighoff et al. 2023 (arXiv:2305.16264): D' = U + U R_D* (1 - exp(-R_D / R_D*)), R_D = epochs - 1;
  the loss and the optimal allocation printed in github.com/huggingface/datablations ("Parametric Fit")
  for the models of the paper's Figure 1.
- Besiroglu et al. 2024 (arXiv:2404.10102): the allocation exponent a = beta / (alpha + beta) ~ 0.51.
- Sardana et al. 2023 (arXiv:2401.00448): least 6 N D + 2 N D_inf at a fixed loss; at the optimum the
  Lagrange condition (6 D + 2 D_inf) / (6 N) = (alpha A N^-(alpha+1)) / (beta B D^-(beta+1)) holds.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from dataprep.tokenize.manifest import build_manifest, write_manifest
from pretrain.cli import main as cli
from pretrain.config.loading import load_train_config
from pretrain.models.llama import num_params
from pretrain.planning.budget import FITS, METHODS, estimate, parametric_fit
from pretrain.planning.data_constrained import (
    R_D_STAR,
    R_N_STAR,
    allocation,
    at_epochs,
    best_allocation,
    constrained_loss,
    effective_tokens,
)
from pretrain.planning.inference_aware import inference_optimal, lifetime_flops
from pretrain.planning.sizing import TINY

DEMO_TOKENS, DEMO_DOCS, DEMO_VOCAB = 30_393, 46, 2000  # the demo pipeline's shards (configs/pipeline/demo.yaml)


def _manifest(directory, tokens=DEMO_TOKENS, documents=DEMO_DOCS, vocab=DEMO_VOCAB) -> str:
    """A manifest as the tokenize stage writes it (the shard files themselves are not read by the budget)."""
    half = tokens // 2
    shards = [
        {"name": f"shard-{i}", "documents": documents // 2, "tokens": t, "bin_sha256": "0" * 64, "idx_sha256": "0" * 64}
        for i, t in enumerate((half, tokens - half))
    ]
    write_manifest(str(directory), build_manifest(shards, {"vocab_size": vocab, "special_ids": {"eos": 2}}, "uint16"))
    return str(directory)


def test_repetition_constants_are_the_published_ones():
    assert (R_D_STAR, R_N_STAR) == (15.387756, 5.309743)
    assert (round(R_D_STAR, 1), round(R_N_STAR, 1)) == (15.4, 5.3)  # as the paper's text prints them


def test_effective_tokens_follow_the_formula():
    u = 1e9
    assert effective_tokens(0.5 * u, u) == 0.5 * u and effective_tokens(u, u) == u  # no repeats: D' = D
    four = 1 + 15.387756 * (1 - math.exp(-3 / 15.387756))  # 4 epochs: R_D = 3
    assert effective_tokens(4 * u, u) / u == pytest.approx(four, rel=1e-12)
    assert round(four, 2) == 3.73
    assert effective_tokens(1e6 * u, u) == pytest.approx((1 + R_D_STAR) * u)  # repeats saturate
    assert effective_tokens(4 * u, None) == 4 * u  # unknown corpus: all tokens fresh


def test_paper_figure_1_losses():
    """The datablations README evaluates the C4 fit for Figure 1's models."""
    c4 = METHODS["approach3-c4"]
    assert constrained_loss(c4, 6.34e9, 242e9, 25e9) == pytest.approx(2.2256440889984477, rel=1e-12)
    assert constrained_loss(c4, 8.67e9, 178e9, 25e9) == pytest.approx(2.2269634075087867, rel=1e-12)


def test_paper_figure_1_best_allocation():
    """The datablations README grid-searches the optimum of Figure 1's compute on the C4 fit."""
    c4 = METHODS["approach3-c4"]
    best = best_allocation(c4, 6 * 8.67e9 * 178e9, 25e9)
    # "-> 227B tokens, 9.1 epochs, 6.8B parameters" (their grid: 500 steps)
    assert best.tokens == pytest.approx(227e9, rel=0.005) and round(best.epochs, 1) == 9.1
    assert best.params == pytest.approx(6.8e9, rel=0.01)
    assert best.loss < constrained_loss(c4, 8.67e9, 178e9, 25e9)


@pytest.mark.parametrize("fit", FITS)
def test_fresh_data_answers_are_unchanged_when_the_corpus_is_large(fit):
    law, c = METHODS[fit], 1e22
    chinchilla = estimate(fit, compute=c)
    best = best_allocation(law, c, unique=1e6 * chinchilla.tokens)
    assert best.params == pytest.approx(chinchilla.params, rel=1e-6)
    assert best.loss == pytest.approx(chinchilla.loss, rel=1e-12) and best.epochs < 1
    fresh = allocation(law, chinchilla.params, chinchilla.tokens, unique=chinchilla.tokens)
    assert fresh.loss == fresh.fresh_loss == pytest.approx(chinchilla.loss)
    assert fresh.effective_tokens == chinchilla.tokens and fresh.effective_params == pytest.approx(chinchilla.params)


@pytest.mark.parametrize("fit", FITS)
def test_repeating_a_capped_corpus_costs_loss(fit):
    law = METHODS[fit]
    chinchilla = estimate(fit, compute=1e22)
    repeated = allocation(law, chinchilla.params, chinchilla.tokens, chinchilla.tokens / 10)
    assert repeated.epochs == pytest.approx(10) and repeated.loss > chinchilla.loss


@pytest.mark.parametrize("fit", FITS)
def test_the_best_answer_on_a_capped_corpus_repeats_it(fit):
    law, c = METHODS[fit], 1e22
    chinchilla = estimate(fit, compute=c)
    unique = chinchilla.tokens / 10
    repeated = allocation(law, chinchilla.params, chinchilla.tokens, unique)
    best = best_allocation(law, c, unique)
    assert best.flops == pytest.approx(c) and best.epochs > 1
    assert chinchilla.loss < best.loss <= repeated.loss
    for factor in (0.7, 1.4):  # any other split of the same compute on the same corpus loses
        n = best.params * factor
        assert constrained_loss(law, n, c / (6 * n), unique) > best.loss


@pytest.mark.parametrize("fit", FITS)
def test_at_epochs_spends_the_compute_on_that_many_passes(fit):
    law, c = METHODS[fit], 1e22
    unique = estimate(fit, compute=c).tokens / 10
    four = at_epochs(law, 4, unique, compute=c)
    assert four.tokens == 4 * unique and four.params == pytest.approx(c / (24 * unique))
    assert four.effective_tokens / unique == pytest.approx(1 + R_D_STAR * (1 - math.exp(-3 / R_D_STAR)))
    assert at_epochs(law, 4, unique, params=1e9).flops == pytest.approx(6e9 * 4 * unique)


def test_epoch_refit_allocates_about_half_to_parameters():
    epoch = parametric_fit("approach3-epoch")
    assert epoch.a == pytest.approx(0.3658 / (0.3478 + 0.3658)) and round(epoch.a, 2) == 0.51
    n1, n2 = (estimate("approach3-epoch", compute=c).params for c in (1e20, 1e24))
    assert math.log(n2 / n1) / math.log(1e4) == pytest.approx(epoch.a, rel=1e-9)
    with pytest.raises(ValueError, match="not a parametric loss fit"):
        parametric_fit("approach1")


@pytest.mark.parametrize("fit", FITS)
def test_inference_aware_reduces_to_chinchilla_without_inference(fit):
    law = METHODS[fit]
    chinchilla = estimate(fit, compute=1e23)
    n, d = inference_optimal(law.loss, chinchilla.loss, 0.0, chinchilla.params)
    assert n == pytest.approx(chinchilla.params, rel=1e-5) and d == pytest.approx(chinchilla.tokens, rel=1e-5)


def test_inference_aware_meets_the_lagrange_condition():
    law = METHODS["approach3"]
    chinchilla = estimate("approach3", compute=1e23)
    served = 1e13
    n, d = inference_optimal(law.loss, chinchilla.loss, served, chinchilla.params)
    assert law.loss(n, d) == pytest.approx(chinchilla.loss, rel=1e-12)  # the same quality
    assert n < chinchilla.params and d > chinchilla.tokens  # smaller, trained longer
    lhs = (6 * d + 2 * served) / (6 * n)
    rhs = (law.alpha * law.A * n ** (-law.alpha - 1)) / (law.beta * law.B * d ** (-law.beta - 1))
    assert lhs == pytest.approx(rhs, rel=1e-5)
    assert lifetime_flops(n, d, served) < lifetime_flops(chinchilla.params, chinchilla.tokens, served)


def test_inference_aware_on_a_capped_corpus():
    law, c = METHODS["approach3"], 1e22
    unique = estimate("approach3", compute=c).tokens / 5
    best = best_allocation(law, c, unique)

    def loss(n, d):
        return constrained_loss(law, n, d, unique)

    n, d = inference_optimal(loss, best.loss, 0.0, best.params)
    assert n == pytest.approx(best.params, rel=1e-3)
    n, d = inference_optimal(loss, best.loss, 1e12, best.params)
    assert loss(n, d) == pytest.approx(best.loss) and n < best.params


def test_cli_reads_unique_tokens_from_the_manifest(tmp_path, capsys):
    shards = _manifest(tmp_path / "shards")
    assert cli(["budget", "--compute", "1e21", "--data", shards, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unique_tokens"] == DEMO_TOKENS and str(DEMO_DOCS) in out["unique_tokens_source"]
    for row in out["estimates"]:  # every answer names its epochs and effective tokens
        assert row["epochs"] == pytest.approx(row["tokens"] / DEMO_TOKENS)
        assert row["effective_tokens"] == pytest.approx(effective_tokens(row["tokens"], DEMO_TOKENS))
    dc = out["data_constrained"]
    assert dc["exceeds_unique"] and dc["fit"] == "approach3" and dc["compute"] == pytest.approx(1e21)
    for key in ("chinchilla", "best"):
        assert {
            "params",
            "tokens",
            "flops",
            "epochs",
            "effective_tokens",
            "effective_params",
            "loss",
            "fresh_loss",
            "repetition_penalty",
            "loss_above_fresh_optimum",
        } <= set(dc[key])
    # 30K tokens cannot carry 1e21 FLOPs: the fit's losses there exceed a uniform guess's and are left out
    assert dc["best"]["loss"] is None and dc["best"]["loss_beyond_fit"] and dc["chinchilla"]["loss_beyond_fit"]
    assert "epochs of a corpus of 30.4K" in out["corpus_warning"]
    assert "15.387756" in out["sources"]["R_D*, R_N*"] and "2203.15556" in out["sources"]["approach3"]
    assert cli(["budget", "--compute", "1e22", "--unique-tokens", "30B", "--json"]) == 0
    dc = json.loads(capsys.readouterr().out)["data_constrained"]
    assert dc["best"]["loss"] <= dc["chinchilla"]["loss"] < METHODS["approach3"].uniform_loss


def test_plan_on_a_small_corpus_warns_of_its_epochs(tmp_path, capsys):
    shards = _manifest(tmp_path / "shards")
    assert cli(["plan", "1b", "--data", shards]) == 0
    out = capsys.readouterr().out
    assert "tokens are 568K epochs (what repeats" in out and "warning: 17.3B tokens are 568K epochs of a corpus" in out


def test_a_small_corpus_prints_no_loss_beyond_a_uniform_guess_nor_an_empty_batch(tmp_path, capsys):
    """Sizes far below the fits' range: the formula's losses (up to ~100 nats) and a batch under one
    sequence are not shown as answers; the repetition warning says what the corpus supports."""
    shards = _manifest(tmp_path / "shards")
    assert cli(["budget", "--data", shards, "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "less than one sequence of 2048: 1 sequence" in out and "= 0 sequences" not in out
    assert ">10.4" in out and ">10.8" in out and "loss beyond the fit's range" in out
    assert not re.search(r"loss (1[1-9]|[2-9]\d)\.", out)  # no loss of 11 nats or more anywhere
    assert cli(["budget", "--data", shards, "--compute", "1e23"]) == 0
    out = capsys.readouterr().out
    assert "M epochs" in out and re.search(r"warning: \S+ tokens are [\d.]+[MBT] epochs of a corpus of 30.4K", out)
    assert not re.search(r"\d{6,}\.\d epochs", out)  # epochs past ten thousand read as 11M, not 11000613.8


def test_cli_epochs_alone_size_the_model_for_that_many_passes(tmp_path, capsys):
    shards = _manifest(tmp_path / "shards")
    assert cli(["budget", "--data", shards, "--epochs", "4", "--method", "approach3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["estimates"]
    assert row["tokens"] == pytest.approx(4 * DEMO_TOKENS) and row["epochs"] == pytest.approx(4)
    assert row["effective_tokens"] / DEMO_TOKENS == pytest.approx(1 + R_D_STAR * (1 - math.exp(-3 / R_D_STAR)))


@pytest.fixture
def capped_corpus_budget(capsys) -> dict:
    """One ``budget`` on a capped corpus at four epochs, with the inference-aware answer."""
    argv = ["budget", "--compute", "1e23", "--unique-tokens", "100B", "--epochs", "4", "--fit", "approach3-epoch"]
    assert cli([*argv, "--inference-tokens", "10T", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_at_epochs_spends_the_compute_on_the_unique_tokens(capped_corpus_budget):
    out = capped_corpus_budget
    at = out["data_constrained"]["at_epochs"]
    assert at["tokens"] == pytest.approx(400e9) and at["flops"] == pytest.approx(1e23)
    assert "Besiroglu" in out["sources"]["approach3-epoch"]


def test_cli_inference_aware_answer_is_smaller_than_its_data_constrained_reference(capped_corpus_budget):
    out = capped_corpus_budget
    inf = out["inference_aware"]
    assert inf["fit"] == "approach3-epoch" and inf["inference_tokens"] == 10e12 and not out["extrapolated"]
    assert inf["reference"]["params"] == pytest.approx(out["data_constrained"]["best"]["params"])
    assert inf["inference_optimal"]["params"] < inf["reference"]["params"] and 0 < inf["saving"] < 1
    assert "Sardana" in out["sources"]["inference-aware"]


def test_cli_zero_inference_tokens_is_the_chinchilla_answer(capsys):
    assert cli(["budget", "--compute", "1e22", "--inference-tokens", "0", "--json"]) == 0
    inf = json.loads(capsys.readouterr().out)["inference_aware"]
    assert inf["inference_optimal"]["params"] == pytest.approx(inf["reference"]["params"], rel=1e-5)
    assert inf["reference"]["params"] == pytest.approx(estimate("approach3", compute=1e22).params)
    assert inf["reference"]["epochs"] == 1.0 and inf["reference"]["unique_tokens"] is None


def test_cli_table_prints_every_source(tmp_path, capsys):
    shards = _manifest(tmp_path / "shards")
    assert cli(["budget", "--model", "tiny", "--data", shards, "--epochs", "3", "--inference-tokens", "1M"]) == 0
    out = capsys.readouterr().out
    assert f"N = {num_params(TINY.model_copy(update={'vocab_size': DEMO_VOCAB})):,} parameters" in out  # shards' vocab
    for text in (
        "epochs",
        "D_eff",
        "best under the cap",
        "at 3 epochs",
        "inference-optimal",
        "sources:",
        "arXiv:2203.15556",
        "arXiv:2404.10102",
        "arXiv:2305.16264",
        "arXiv:2401.00448",
        "outside the runs the fits were made on",
    ):  # a 355K model is far below the fitted range
        assert text in out, text


@pytest.mark.parametrize(
    "argv,message",
    [
        (["budget", "--compute", "1e21", "--epochs", "4"], "--epochs needs the corpus"),
        (["budget", "--tokens", "1B", "--epochs", "4", "--unique-tokens", "1B"], "do not combine it with --tokens"),
        (["budget", "--compute", "1e21", "--unique-tokens", "-3"], "positive"),
        (["budget", "--compute", "1e21", "--unique-tokens", "1B", "--epochs", "0"], "epochs must be positive"),
        (["budget", "--compute", "1e21", "--inference-tokens", "-1"], "must not be negative"),
        (["budget", "--compute", "1e21", "--data", "/nonexistent/shards"], "/nonexistent/shards: no such folder"),
    ],
)
def test_cli_errors_are_one_line(argv, message, capsys):
    assert cli(argv) == 2
    assert message in capsys.readouterr().err


def test_plan_inherits_the_epochs(tmp_path, capsys):
    shards = _manifest(tmp_path / "shards")
    out = tmp_path / "train.yaml"
    assert (
        cli(
            [
                "plan",
                "tiny",
                "--gpu",
                "cpu",
                "--precision",
                "fp32",
                "--seq-len",
                "128",
                "--data",
                shards,
                "--epochs",
                "4",
                "--output",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    r = json.loads(capsys.readouterr().out)
    assert r["time"]["epochs"] == pytest.approx(4) and r["time"]["unique_tokens"] == DEMO_TOKENS
    assert r["model"]["vocab_size"] == DEMO_VOCAB
    assert load_train_config(str(out)).max_tokens == 4 * DEMO_TOKENS  # the loader repeats the data per epoch
    assert cli(["plan", "tiny", "--gpu", "cpu", "--data", shards, "--method", "approach3"]) == 0
    text = capsys.readouterr().out
    assert "Approach 3 (parametric loss) for this N" in text and "epochs" in text
    assert cli(["plan", "tiny", "--epochs", "4"]) == 2
    assert "--epochs needs --data" in capsys.readouterr().err


def test_the_planning_commands_read_the_manifest_at_a_url(tmp_path, capsys):
    """``--data`` may name shards at a URL (here a real HTTP server on 127.0.0.1): the same answers as the
    local folder, and the written training config reads the URL."""
    pytest.importorskip("aiohttp")  # fsspec's HTTP filesystem
    from range_server import serve_folder

    local = _manifest(tmp_path / "shards")
    argv = ["budget", "--compute", "1e21", "--json"]
    assert cli([*argv, "--data", local]) == 0
    from_local = json.loads(capsys.readouterr().out)
    with serve_folder(tmp_path) as server:
        url = f"{server.url}/shards"
        assert cli([*argv, "--data", url]) == 0
        from_url = json.loads(capsys.readouterr().out)
        out = tmp_path / "train.yaml"
        assert (
            cli(
                [
                    "plan",
                    "tiny",
                    "--gpu",
                    "cpu",
                    "--precision",
                    "fp32",
                    "--seq-len",
                    "128",
                    "--data",
                    url,
                    "--epochs",
                    "4",
                    "--output",
                    str(out),
                    "--json",
                ]
            )
            == 0
        )
        planned = json.loads(capsys.readouterr().out)
        assert cli(["budget", "--compute", "1e21", "--data", f"{server.url}/elsewhere"]) == 2
        assert f"{server.url}/elsewhere/manifest.json not found" in capsys.readouterr().err
    assert from_url["estimates"] == from_local["estimates"] and from_url["unique_tokens"] == DEMO_TOKENS
    assert planned["time"]["unique_tokens"] == DEMO_TOKENS and planned["model"]["vocab_size"] == DEMO_VOCAB
    cfg = load_train_config(str(out))
    assert [s.path for s in cfg.data.sources] == [url] and cfg.max_tokens == 4 * DEMO_TOKENS
