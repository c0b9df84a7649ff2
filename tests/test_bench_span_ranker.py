"""bench/span_ranker.py: the listwise ranking and the answer-or-withhold model are fitted as documented, the
hand-set decision it is compared with is `Reader.extract`'s, and the module it writes is what `relation` reads."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench, write_squad

ranker = load_bench("span_ranker")


def test_the_listwise_fit_puts_the_right_span_first() -> None:
    # feature 0 marks the right span, feature 1 is noise: the fit must weigh the first and rank by it
    rng = np.random.default_rng(0)
    xs, ys = [], []
    for _ in range(60):
        n = int(rng.integers(3, 8))
        x = np.c_[np.zeros(n), rng.normal(size=n)]
        right = int(rng.integers(n))
        x[right, 0] = 1.0
        y = np.zeros(n)
        y[right] = 1.0
        xs.append(x)
        ys.append(y)
    w = ranker.fit_ranking(xs, ys, l2=1e-4)
    assert w[0] > 1.0 and abs(w[1]) < w[0] / 4
    assert all(int(np.argmax(x @ w)) == int(np.argmax(y)) for x, y in zip(xs, ys, strict=True))


def test_the_logistic_fit_separates_and_keeps_its_bias() -> None:
    x = np.array([[0.0], [0.2], [0.8], [1.0]] * 10)
    y = np.array([0.0, 0.0, 1.0, 1.0] * 10)
    w = ranker.fit_logistic(x, y, l2=1e-4)
    p = 1 / (1 + np.exp(-(np.c_[x, np.ones(len(x))] @ w)))
    assert (p[y == 1] > 0.5).all() and (p[y == 0] < 0.5).all()
    assert w[-1] < 0  # the bias: at x = 0 the answer is wrong


def test_a_built_question_holds_its_labelled_candidates_and_the_hand_set_decision(tmp_path: Path) -> None:
    qid = next(f"q{i}" for i in range(100) if ranker.half(f"q{i}") == "tuning")  # the reporting half is never read
    write_squad(tmp_path, [(qid, "When was IBM founded?", "1911", "IBM_0")])
    args = argparse.Namespace(
        questions=10,
        sources=2,
        unanswerable=0.0,
        seed=1,
        eval_dir=str(tmp_path),
        spacy_model=ranker.Settings.model_fields["spacy_model"].default,
    )
    [row] = ranker.build(args)
    texts = [c["norm"] for c in row["candidates"]]
    assert row["id"] == qid and not row["unanswerable"] and "1911" in texts and "1888" in texts
    right = texts.index("1911")
    assert row["candidates"][right]["em"] == 1.0 and row["candidates"][right]["grounded"]
    assert row["candidates"][texts.index("1888")]["em"] == 0.0  # another company's founding year
    assert row["by_score"] == right  # Reader.extract_by_score's answer, as the baseline
    assert "coverage_gap" in row["candidates"][right]["features"]


def test_the_written_module_is_what_relation_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "span_model.py"
    monkeypatch.setattr(ranker, "MODEL_FILE", target)
    monkeypatch.setattr(ranker, "ROOT", tmp_path)
    names = ["coverage", "label:date"]
    args = argparse.Namespace(sources=5, unanswerable=0.2, seed=1, max_false_grounded=0.1)
    ranker.write_model(names, np.array([1.5, -0.25]), ["logit", "share"], np.array([2.0, 0.0, -1.0]), 0.65, args, 10)
    spec = importlib.util.spec_from_file_location("written_span_model", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.RANKING == {"coverage": 1.5, "label:date": -0.25}
    assert module.ABSTAIN == {"logit": 2.0, "bias": -1.0}  # a zero weight is left out
    assert module.MIN_CONFIDENCE == 0.65
