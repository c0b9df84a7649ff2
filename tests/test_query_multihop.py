"""Multi-hop detector quality on the shared question sets (skipped when the shared data folder is absent).

The measurement is `bench/query_eval.py` (`make bench-query`); its figures are in bench/README.md. The
thresholds leave room for the gap between the samples and the whole files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from query_eval import datasets, measure  # noqa: E402 - bench/ is put on sys.path above

DATA = ROOT.parent / "shared" / "data"
FILES = ["hotpotqa_train100/queries.jsonl", "beir_scifact/queries.jsonl", "squad_v1.1_dev/queries.jsonl"]
pytestmark = pytest.mark.skipif(
    not all((DATA / f).is_file() for f in FILES), reason=f"shared question sets not found under {DATA}"
)


@pytest.fixture(scope="module")
def questions() -> dict[str, list[str]]:
    return datasets(DATA)


def test_hotpotqa_multi_hop_recall(questions: dict[str, list[str]]) -> None:
    stats = measure(questions["hotpotqa"], "hotpotqa")
    assert stats.total == 100
    assert stats.rate >= 0.85, f"recall {stats.rate:.3f} on HotpotQA"


@pytest.mark.parametrize("name", ["scifact", "squad"])
def test_single_hop_sets_rarely_flagged(questions: dict[str, list[str]], name: str) -> None:
    stats = measure(questions[name], name)
    assert stats.total == 300
    assert stats.rate <= 0.10, f"{stats.flagged}/{stats.total} {name} questions flagged multi-hop"
