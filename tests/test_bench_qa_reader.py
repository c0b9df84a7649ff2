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
