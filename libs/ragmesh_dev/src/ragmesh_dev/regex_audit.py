"""Every regular expression the services run, timed on adversarial text of length n and 4n: growth must be linear.

Nearly every regex in ragmesh reads untrusted text (questions, history, file names, document text), and a
backtracking engine can turn a short input into seconds of CPU (35 s for one 40,000-character attribute in the
upload check; 8.6-11 s for a newline-heavy chat history in the guardrail). This audit finds the regexes by
importing each module under libs/*/src and services/*/src and collecting its compiled patterns (module globals,
and those inside module-level containers and dataclasses), plus the literal patterns passed inline to
`re.search(...)` and the like. For each it builds adversarial inputs from a palette of characters and from the
words in the pattern itself, picks the slowest at a small size, and times it at n and 4n (min of several runs).
A linear pattern grows ~4x; a quadratic one ~16x.

`python -m ragmesh_dev.regex_audit [ROOT]` prints one JSON line per pattern: where, engine, n, the seconds at n
and 4n, their ratio and the worst input's description. The test (tests/test_regex_linear.py) runs it in a child
process with a timeout, so that an exponential pattern fails the test instead of hanging it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import re2

SKIPPED_MODULES = ("__main__", "_pb2", "ragmesh_ingestion.worker", "ragmesh_parser.worker", "ragmesh_dev.")
SIZES = (2000,)  # the size the slowest inputs are picked at
MIN_SECONDS = 0.003  # the time at 4n below which n grows (too short to read a ratio from)
MAX_N = 128_000
REPEATS = 3


@dataclass(frozen=True)
class Found:
    where: str
    engine: str  # "re" or "re2"
    regex: Any  # the compiled pattern
    method: str = "finditer"  # how the code applies it: "match"/"fullmatch" are anchored, anything else scans


def _is_re2(value: Any) -> bool:
    return type(value).__module__ == "re2" and hasattr(value, "finditer")


def _walk(value: Any, where: str, depth: int = 0) -> Iterator[Found]:
    if isinstance(value, re.Pattern):
        yield Found(where, "re", value)
    elif _is_re2(value):
        yield Found(where, "re2", value)
    elif depth >= 3:
        return
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{where}[{key!r}]", depth + 1)
    elif isinstance(value, list | tuple | frozenset | set):
        for i, item in enumerate(value):
            yield from _walk(item, f"{where}[{i}]", depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{where}.{f.name}", depth + 1)


_CALLS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}


def _inline(source: str, module: Any, name: str) -> Iterator[Found]:
    """Patterns passed to re.<call>(...) inside functions, as literals or module-level strings."""
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("re", "re2")
            and node.args
        ):
            continue
        first = node.args[0]
        pattern: Any = None
        if isinstance(first, ast.Constant) and isinstance(first.value, str | bytes):
            pattern = first.value
        elif isinstance(first, ast.Name) and isinstance(getattr(module, first.id, None), str | bytes):
            pattern = getattr(module, first.id)
        if pattern is None:
            continue
        flags = 0
        for keyword in node.keywords:
            if keyword.arg == "flags":
                try:
                    flags = int(eval(compile(ast.Expression(keyword.value), name, "eval"), vars(module)))
                except Exception:  # noqa: BLE001 - a flag expression we cannot evaluate: default flags
                    flags = 0
        if len(node.args) > 2 + (node.func.attr in ("sub", "subn")) and not flags:  # flags given by position
            try:
                flags = int(eval(compile(ast.Expression(node.args[-1]), name, "eval"), vars(module)))
            except Exception:  # noqa: BLE001 - not a flag expression
                flags = 0
        where = f"{name}:{node.lineno}"
        method = node.func.attr if node.func.attr in ("match", "fullmatch") else "finditer"
        if node.func.value.id == "re2":
            yield Found(where, "re2", re2.compile(pattern), method)
        else:
            yield Found(where, "re", re.compile(pattern, flags), method)


def modules(root: Path) -> Iterator[tuple[str, Path]]:
    for src in sorted([*root.glob("libs/*/src"), *root.glob("services/*/src")]):
        for path in sorted(src.rglob("*.py")):
            name = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
            if not any(skip in name for skip in SKIPPED_MODULES):
                yield name, path


def collect(root: Path) -> tuple[list[Found], list[str]]:
    """The patterns of every module, and the modules with regexes that could not be imported."""
    found: dict[int, Found] = {}
    failed: list[str] = []
    for name, path in modules(root):
        source = path.read_text()
        if "re." not in source and "re2." not in source:
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - reported
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        for key, value in vars(module).items():
            if getattr(value, "__module__", name) not in (name, None) and isinstance(value, type):
                continue
            used = set(re.findall(rf"\b{re.escape(key)}\.(\w+)\(", source))
            method = used.pop() if len(used) == 1 and used <= {"match", "fullmatch"} else "finditer"
            for item in _walk(value, f"{name}:{key}"):
                found.setdefault(id(item.regex), dataclasses.replace(item, method=method))
        for item in _inline(source, module, name):
            found.setdefault(hash((item.engine, item.regex.pattern, getattr(item.regex, "flags", 0))), item)
    unique: dict[tuple[str, Any, int], Found] = {}
    for item in found.values():
        unique.setdefault((item.engine, item.regex.pattern, getattr(item.regex, "flags", 0)), item)
    return list(unique.values()), failed


_PALETTE = [" ", "\n", "a", "A", "0", ".", ",", "-", "_", "<", ">", "=", '"', "'", "/", ":", "é", "#", "(", "*", "|"]
_PAIRS = ["a ", "a\n", " \n", "0.", "a.", "a-", "0 ", "a=", "<a", "Aa", "a,", "a'", "a0", "A ", "0,"]


def _words(pattern: str) -> list[str]:
    words = dict.fromkeys(w for w in re.findall(r"[A-Za-z]{3,}", pattern) if w not in {"INST", "SYS"})
    return list(words)[:12]


def inputs(pattern: str, n: int) -> list[tuple[str, str]]:
    """(description, text) of length about n that keep a backtracking engine busy for common pattern shapes."""
    out = [(f"{c!r}*n", c * n) for c in _PALETTE]
    out += [(f"{p!r}*n/2", p * (n // 2)) for p in _PAIRS]
    for word in _words(pattern):
        out.append((f"{word!r}+' '*n", f"{word} " + " " * n))
        out.append((f"{word!r}+'a'*n", f"{word} " + "a" * n))
        out.append((f"({word!r}+' ')*k", (word + " ") * (n // (len(word) + 1))))
        out.append((f"{word!r}+' \\n'*n", f"{word}" + " \n" * (n // 2)))
        out.append((f"{word!r}+' a'*n", f"{word}" + " a" * (n // 2)))
    return out


def _runner(regex: Any, method: str) -> Callable[[Any], None]:
    if method in ("match", "fullmatch"):
        anchored = getattr(regex, method)
        return lambda text: anchored(text)

    def run(text: Any) -> None:
        for _ in regex.finditer(text):
            pass

    return run


def _time(run: Callable[[Any], None], text: Any, repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):  # CPU time of this thread: a busy machine's preemptions do not count
        started = time.thread_time()
        run(text)
        best = min(best, time.thread_time() - started)
    return best


def _pair(run: Callable[[Any], None], small: Any, large: Any, repeats: int = 5) -> tuple[float, float]:
    """The best times at n and 4n, measured in turns, so that both see the same load on a busy machine."""
    best_small = best_large = float("inf")
    for _ in range(repeats):
        best_small = min(best_small, _time(run, small, 1))
        best_large = min(best_large, _time(run, large, 1))
    return best_small, best_large


def measure(item: Found) -> dict[str, Any]:
    """The worst growth from n to 4n over the inputs that are slowest at a small size. n starts at 500 and grows
    while the time at 4n is too short to read a ratio from (a quadratic pattern stays cheap to measure)."""
    pattern = item.regex.pattern
    is_bytes = isinstance(pattern, bytes)
    source = pattern.decode("latin-1") if is_bytes else pattern
    run = _runner(item.regex, item.method)

    def text_of(what: str, n: int) -> Any:
        text = dict(inputs(source, n))[what]
        return text.encode("utf-8") if is_bytes else text

    probe = inputs(source, SIZES[0])
    timed = sorted(((_time(run, text_of(what, SIZES[0]), 1), what) for what, _ in probe), reverse=True)[:2]
    worst: dict[str, Any] = {"ratio": 0.0}
    for _, what in timed:
        n = 500
        while True:
            t_small, t_large = _pair(run, text_of(what, n), text_of(what, 4 * n))
            if t_large >= MIN_SECONDS or n >= MAX_N:
                break
            n *= 4
        ratio = t_large / max(t_small, 1e-9)
        if ratio > worst["ratio"]:
            worst = {"ratio": ratio, "input": what, "n": n, "t_n": t_small, "t_4n": t_large}
    return {"where": item.where, "engine": item.engine, "method": item.method, **worst}


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    found, failed = collect(root)
    for failure in failed:
        print(json.dumps({"import_failed": failure}), flush=True)
    print(json.dumps({"patterns": len(found)}), flush=True)
    for item in found:
        print(json.dumps({"measuring": item.where}), flush=True)
        print(json.dumps(measure(item)), flush=True)


if __name__ == "__main__":
    main()
