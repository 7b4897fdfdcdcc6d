"""The ablation's comparison: paired t-intervals over seeds, the winner's direction per measure, the
probability of the correct answer, and arm parsing."""

from __future__ import annotations

import math

import pytest

from pretrain.ablation.arms import parse_arm, resolve_arm
from pretrain.ablation.scoring import correct_prob
from pretrain.ablation.stats import paired_interval, summarise, t_quantile


def test_t_quantiles_match_the_table():
    assert [round(t_quantile(d), 3) for d in (1, 2, 4, 9, 30)] == [12.706, 4.303, 2.776, 2.262, 2.042]


def test_paired_interval_by_hand():
    a, b = [3.0, 3.2, 3.1], [3.5, 3.6, 3.9]
    diff, (low, high) = paired_interval(a, b)
    diffs = [-0.5, -0.4, -0.8]
    sd = math.sqrt(sum((d - diff) ** 2 for d in diffs) / 2)
    assert diff == pytest.approx(-17 / 30)
    assert (low, high) == pytest.approx((diff - 4.303 * sd / math.sqrt(3), diff + 4.303 * sd / math.sqrt(3)), rel=1e-3)


def test_pairing_is_by_seed_not_by_order_of_values():
    """The same seed's offset in both arms cancels: paired, a small steady gap is significant."""
    scores = {"a": {0: {"x/bpb": 3.0}, 1: {"x/bpb": 4.0}}, "b": {0: {"x/bpb": 3.1}, 1: {"x/bpb": 4.1001}}}
    (pair,) = summarise(scores)["pairs"]
    assert pair["winner"] == "a" and pair["ci95"][1] < 0


def test_winner_follows_each_measures_direction():
    scores = {
        "a": {s: {"x/bpb": 2.0 + s * 0.01, "t/acc": 0.6 + s * 0.01} for s in range(3)},
        "b": {s: {"x/bpb": 2.5 + s * 0.012, "t/acc": 0.4 + s * 0.013} for s in range(3)},
        "c": {s: {"x/bpb": 2.0 + s * 0.011 - 0.001 * (s == 1), "t/acc": 0.6 + s * 0.011} for s in range(3)},
    }
    result = summarise(scores)
    winners = {(p["a"], p["b"], p["measure"]): p["winner"] for p in result["pairs"]}
    assert winners[("a", "b", "x/bpb")] == "a" and winners[("a", "b", "t/acc")] == "a"  # lower bpb, higher acc
    assert winners[("b", "c", "x/bpb")] == "c" and winners[("b", "c", "t/acc")] == "c"
    assert result["arms"]["a"]["x/bpb"]["mean"] == pytest.approx(2.01)


def test_correct_prob_is_the_softmax_at_the_answer():
    sample = {"target": 1, "filtered_resps": [(-2.0, False), (-1.0, True), (-3.0, False)]}
    expected = math.exp(-1) / (math.exp(-2) + math.exp(-1) + math.exp(-3))
    assert correct_prob(sample) == pytest.approx(expected)
    assert correct_prob({"target": "Paris", "filtered_resps": [(-1.0, True)]}) is None


def test_an_arm_is_named_name_equals_path():
    assert parse_arm("real=data/x.jsonl") == ("real", "data/x.jsonl")
    for bad in ("real", "=x", "a b=x", "real="):
        with pytest.raises(ValueError, match="NAME=PATH"):
            parse_arm(bad)


def test_an_arms_documents_must_exist(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"text": "a"}\n')
    assert resolve_arm("docs", str(tmp_path / "docs.jsonl")).documents == str(tmp_path / "docs.jsonl")
    with pytest.raises(FileNotFoundError, match="no such file, folder or mixture preset"):
        resolve_arm("x", str(tmp_path / "missing"))
