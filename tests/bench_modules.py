"""Loads a script of bench/ as a module for its tests (bench/ is no package)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as the module `bench_<name>`; bench/ goes on sys.path (answer.py imports its sibling
    retrieval.py)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


SQUAD_PARAGRAPHS = (
    ("IBM_0", "IBM", "IBM was founded in 1911 in Endicott, New York. It was renamed in 1924."),
    ("Kodak_0", "Kodak", "Kodak was founded in 1888 by George Eastman in Rochester."),
)


def write_squad(root: Path, questions: list[tuple[str, str, str, str]]) -> None:
    """A two-paragraph SQuAD folder in the shared data's layout (`root`/squad_v1.1_dev) with `questions`:
    (id, text, answer, the id of the paragraph that answers it)."""
    data = root / "squad_v1.1_dev"
    (data / "qrels").mkdir(parents=True)
    rows = [json.dumps({"_id": pid, "title": title, "text": text}) for pid, title, text in SQUAD_PARAGRAPHS]
    (data / "corpus.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    queries = [json.dumps({"_id": qid, "text": text, "answers": [answer]}) for qid, text, answer, _ in questions]
    (data / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    qrels = "".join(f"{qid}\t{pid}\t1\n" for qid, _, _, pid in questions)
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
