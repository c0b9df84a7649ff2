"""bench/qa_reader.py: the span reader is fitted on the fit side of SQuAD's tuning half only, and what it writes is
what the answerer loads (the adapter's names match the base model's layers; a mismatch would fail the load)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

qa = load_bench("qa_reader")


def _squad(root: Path, ids: dict[str, str]) -> None:
    data = root / "squad_v1.1_dev"
    (data / "qrels").mkdir(parents=True)
    paragraphs = [
        ("IBM_0", "IBM", "IBM was founded in 1911 in Endicott, New York. It was renamed in 1924."),
        ("Kodak_0", "Kodak", "Kodak was founded in 1888 by George Eastman in Rochester."),
    ]
    rows = [json.dumps({"_id": pid, "title": title, "text": text}) for pid, title, text in paragraphs]
    (data / "corpus.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    questions = [
        {"_id": ids["fit"], "text": "When was IBM founded?", "answers": ["1911"]},
        {"_id": ids["validate"], "text": "Who founded Kodak?", "answers": ["George Eastman"]},
        {"_id": ids["reporting"], "text": "When was Kodak founded?", "answers": ["1888"]},
    ]
    (data / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
    qrels = [f"{ids['fit']}\tIBM_0\t1", f"{ids['validate']}\tKodak_0\t1", f"{ids['reporting']}\tKodak_0\t1"]
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n", encoding="utf-8")


def _ids() -> dict[str, str]:
    names = [f"q{i}" for i in range(400)]
    return {
        "fit": next(n for n in names if qa.half(n) == "tuning" and qa._side(n) == "fit"),
        "validate": next(n for n in names if qa.half(n) == "tuning" and qa._side(n) == "validate"),
        "reporting": next(n for n in names if qa.half(n) == "reporting"),
    }


def test_only_the_fit_side_of_the_tuning_half_is_fitted_on(tmp_path: Path) -> None:
    ids = _ids()
    _squad(tmp_path, ids)
    _, fit, _ = qa.questions(str(tmp_path), "fit")
    _, validate, _ = qa.questions(str(tmp_path), "validate")
    assert [q["_id"] for q in fit] == [ids["fit"]]
    assert [q["_id"] for q in validate] == [ids["validate"]]  # the reporting half is in neither


def test_a_fitted_adapter_loads_into_the_answerers_reader(tmp_path: Path) -> None:
    _squad(tmp_path, _ids())
    adapter = tmp_path / "adapter.safetensors"
    args = argparse.Namespace(
        data=str(tmp_path), adapter=str(adapter), seed=0, epochs=1, batch=2, lr=1e-3, rank=2, negatives=1.0
    )
    qa.fit(args)
    reader = qa.span_reader.SpanReader.load(adapter)
    text = "IBM was founded in 1911 in Endicott, New York."
    reading = reader.read("When was IBM founded?", [text])
    assert reading.score(0, text.index("1911"), text.index("1911") + 4) is not None
