"""Multi-hop detector quality on the shared question sets (skipped when /work/shared/data is absent).

Measured when written (python -m ragmesh_gateway.query.evaluate): HotpotQA recall 0.90 (90/100); flagged
SciFact claims 0.047 (14/300), SQuAD questions 0.033 (10/300); on the whole files, which the rules were not
tuned on: SciFact 0.032 (35/1109), SQuAD 0.067 (705/10570). The thresholds leave room for that gap.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ragmesh_gateway.query.evaluate import datasets, measure

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
FILES = ["hotpotqa_train100/queries.jsonl", "beir_scifact/queries.jsonl", "squad_v1.1_dev/queries.jsonl"]
pytestmark = pytest.mark.skipif(not all((DATA / f).is_file() for f in FILES),
                                reason=f"shared question sets not found under {DATA}")


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

