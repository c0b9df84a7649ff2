"""The span reader's training loop, standalone: torch, transformers, peft and safetensors only (and
`ragmesh_answerer.span_reader` from this checkout, which imports none of the services' dependencies).

`bench/qa_reader.py fit` builds the examples (tokenised question + paragraph pairs of SQuAD dev's fit two thirds)
and calls `train` here. The same loop runs on a machine that has only those four libraries (a GPU machine),
from examples exported by `qa_reader.py examples`:

    python bench/qa_reader.py examples --output /tmp/reader-examples.json   # here: tokenised fit + validation
    python bench/reader_fit.py --examples /tmp/reader-examples.json --base MODEL_DIR --out DIR \\
        --configs r16:e2:lr1e-3 r64:e4:lr5e-4                                 # there: one adapter per config

Every config is fitted from the same base and scored on the validation examples (the validation third of the
tuning half, never fitted on): on (question, answering paragraph) pairs, exact match and token overlap of the
best span (at most `MAX_ANSWER_TOKENS` context tokens) with the gold tokens; on (question, a BM25 neighbour)
pairs, how often the no-answer score ([CLS] start + end) beats every span. Those scores only rank configs;
`qa_reader.py tune` measures a chosen adapter the way the answerer uses it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "services" / "answerer" / "src"))

from ragmesh_answerer.span_reader import MAX_ANSWER_TOKENS, merge

TARGETS = ["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"]


@dataclass(frozen=True)
class Config:
    """One fitting: LoRA rank (0: every weight trained), epochs, peak learning rate, batch size, seed."""

    rank: int = 16
    epochs: int = 2
    lr: float = 1e-3
    batch: int = 16
    seed: int = 0

    @classmethod
    def parse(cls, text: str) -> Config:
        """A config from its text, "r16:e2:lr1e-3:b16:s0" (any part may be left out; r0: every weight trained)."""
        values: dict[str, Any] = {}
        names = {"r": ("rank", int), "e": ("epochs", int), "lr": ("lr", float), "b": ("batch", int), "s": ("seed", int)}
        for part in text.split(":"):
            key = "lr" if part.startswith("lr") else part[:1]
            if key not in names:
                raise ValueError(f"unknown config part {part!r} in {text!r}")
            name, kind = names[key]
            values[name] = kind(part[len(key) :])
        return cls(**values)

    @property
    def name(self) -> str:
        return f"r{self.rank}-e{self.epochs}-lr{self.lr:g}-b{self.batch}-s{self.seed}"


def train(examples: list[dict[str, Any]], base: str, config: Config, device: str = "cpu") -> tuple[Any, Any]:
    """Fit the encoder (a LoRA adapter, or every weight with rank 0) and a start/end head on `examples`
    (`ids`, `types`: the tokenised pair; `s`, `e`: the answer's first and last token, 0 and 0 for no answer)."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(config.seed)
    rng = random.Random(config.seed + 1)
    encoder = AutoModel.from_pretrained(base, dtype=torch.float32)
    if config.rank:
        from peft import LoraConfig, get_peft_model

        encoder = get_peft_model(
            encoder,
            LoraConfig(r=config.rank, lora_alpha=2 * config.rank, lora_dropout=0.1, target_modules=TARGETS),
        )
    encoder.to(device)
    head = torch.nn.Linear(encoder.config.hidden_size, 2).to(device)
    params = [p for p in encoder.parameters() if p.requires_grad] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.01)
    steps = math.ceil(len(examples) / config.batch) * config.epochs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=config.lr, total_steps=steps, pct_start=0.1)
    encoder.train()
    started, step = time.perf_counter(), 0
    while step < steps:
        order = sorted(range(len(examples)), key=lambda _: rng.random())
        for group in (order[i : i + config.batch * 20] for i in range(0, len(order), config.batch * 20)):
            group.sort(key=lambda i: len(examples[i]["ids"]))  # similar lengths in a batch: less padding
            for b in range(0, len(group), config.batch):
                if step >= steps:
                    break
                exs = [examples[i] for i in group[b : b + config.batch]]
                ids, types, mask = _batch(torch, exs, device)
                logits = head(encoder(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state)
                s = logits[..., 0].masked_fill(mask == 0, -1e4)
                e = logits[..., 1].masked_fill(mask == 0, -1e4)
                loss = (
                    torch.nn.functional.cross_entropy(s, torch.tensor([x["s"] for x in exs], device=device))
                    + torch.nn.functional.cross_entropy(e, torch.tensor([x["e"] for x in exs], device=device))
                ) / 2
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                step += 1
                if step % 200 == 0:
                    print(
                        f"  {config.name}: step {step}/{steps} loss {loss.item():.3f} "
                        f"{time.perf_counter() - started:.0f} s",
                        file=sys.stderr,
                    )
    encoder.eval()
    head.eval()
    return encoder, head


def _batch(torch: Any, exs: list[dict[str, Any]], device: str) -> tuple[Any, Any, Any]:
    n = max(len(x["ids"]) for x in exs)
    ids = torch.zeros(len(exs), n, dtype=torch.long)
    types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
    for i, x in enumerate(exs):
        ids[i, : len(x["ids"])] = torch.tensor(x["ids"])
        types[i, : len(x["ids"])] = torch.tensor(x["types"])
        mask[i, : len(x["ids"])] = 1
    return ids.to(device), types.to(device), mask.to(device)


def adapter_tensors(encoder: Any, head: Any) -> dict[str, Any]:
    """What span_reader.merge reads: the head, and each adapted layer's `lora_A` / `lora_B` (fp16)."""
    tensors = {"head.weight": head.weight.detach().half().cpu(), "head.bias": head.bias.detach().half().cpu()}
    for name, value in encoder.state_dict().items():
        if ".lora_" in name:
            key = name.removeprefix("base_model.model.").replace(".default.weight", "")
            tensors[key] = value.detach().half().cpu().contiguous()
    return tensors


def save_adapter(encoder: Any, head: Any, path: str, config: Config) -> None:
    from safetensors.torch import save_file

    save_file(
        adapter_tensors(encoder, head),
        path,
        metadata={"scale": "2.0", "rank": str(config.rank), "fitted": f"bench/reader_fit.py {config.name}"},
    )


def evaluate(encoder: Any, head: Any, examples: list[dict[str, Any]], device: str = "cpu") -> dict[str, float]:
    """Validation scores (see the module docstring): `em` and `f1` over the answerable pairs, `null` the share of
    no-answer pairs whose no-answer score beats every span."""
    import torch

    em = f1 = nulls = 0.0
    answerable = [x for x in examples if x["s"]]
    unanswerable = [x for x in examples if not x["s"]]
    with torch.no_grad():
        for b in range(0, len(examples), 64):
            exs = examples[b : b + 64]
            ids, types, mask = _batch(torch, exs, device)
            logits = head(encoder(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state).float()
            for row, x in enumerate(exs):
                lo, hi = x["context"]
                s, e = logits[row, lo : hi + 1, 0], logits[row, lo : hi + 1, 1]
                n = hi - lo + 1
                pair = s[:, None] + e[None, :]
                allowed = torch.triu(torch.ones(n, n, dtype=torch.bool, device=pair.device))
                allowed &= ~torch.triu(torch.ones(n, n, dtype=torch.bool, device=pair.device), MAX_ANSWER_TOKENS)
                pair = pair.masked_fill(~allowed, -1e9)
                flat = int(torch.argmax(pair))
                ps, pe = lo + flat // n, lo + flat % n
                if x["s"]:
                    em += float(ps == x["s"] and pe == x["e"])
                    overlap = max(0, min(pe, x["e"]) - max(ps, x["s"]) + 1)
                    if overlap:
                        p, r = overlap / (pe - ps + 1), overlap / (x["e"] - x["s"] + 1)
                        f1 += 2 * p * r / (p + r)
                else:
                    nulls += float(logits[row, 0, 0] + logits[row, 0, 1] > pair.max())
    return {
        "em": round(em / max(1, len(answerable)), 4),
        "f1": round(f1 / max(1, len(answerable)), 4),
        "null": round(nulls / max(1, len(unanswerable)), 4),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
    }


def load_adapter(path: str, base: str, device: str = "cpu") -> tuple[Any, Any]:
    """An adapter file merged into the base, as the answerer loads it (to score a fitted one)."""
    import torch
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(base, dtype=torch.float32)
    head, _ = merge(encoder, Path(path))
    return encoder.to(device).eval(), head.to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description="fit span reader adapters from exported examples; rank them")
    parser.add_argument("--examples", required=True, help="qa_reader.py examples' output")
    parser.add_argument("--base", required=True, help="the base model's folder (config.json + weights)")
    parser.add_argument("--out", required=True, help="a folder: one adapter per config, and results.json")
    parser.add_argument("--configs", nargs="*", default=["r16:e2:lr1e-3"])
    parser.add_argument("--device", default="")
    parser.add_argument("--score", nargs="*", default=[], help="adapter files to score first, fitted by no config")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    raw = Path(args.examples).read_bytes()
    data = json.loads(gzip.decompress(raw) if args.examples.endswith(".gz") else raw)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for path in args.score:
        row = {"config": Path(path).name, **evaluate(*load_adapter(path, args.base, device), data["validate"], device)}
        results.append(row)
        print(json.dumps(row), flush=True)
        (out / "results.json").write_text(json.dumps({"device": device, "results": results}, indent=1) + "\n")
    for text in args.configs:
        config = Config.parse(text)
        started = time.perf_counter()
        encoder, head = train(data["fit"], args.base, config, device)
        seconds = time.perf_counter() - started
        scores = evaluate(encoder, head, data["validate"], device)
        if config.rank:
            save_adapter(encoder, head, str(out / f"{config.name}.safetensors"), config)
        row = {"config": config.name, "fit_seconds": round(seconds, 1), **scores}
        results.append(row)
        print(json.dumps(row), flush=True)
        (out / "results.json").write_text(json.dumps({"device": device, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
