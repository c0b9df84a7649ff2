"""Facts about the code's structure that a reader can check: import circles, arrows from libraries to services,
service-to-service imports, and production functions longer than 80 lines.

    python tools/layering_report.py            # a short report; exit code 0
    python tools/layering_report.py --json     # the same as JSON

Imports come from grimp (import-linter's graph; run from the repository root with the venv's paths), counting
every import, those inside functions and under TYPE_CHECKING included. A circle is a strongly connected
component of two or more modules. Lengths count a function's lines from `def` to its last line (ast), over
libs/*/src and services/*/src without the generated stubs (libs/ragmesh_common/src/ragmesh).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
SERVICES = [
    "ragmesh_gateway",
    "ragmesh_parser",
    "ragmesh_embedder",
    "ragmesh_reranker",
    "ragmesh_retriever",
    "ragmesh_graph",
    "ragmesh_answerer",
    "ragmesh_ingestion",
]
LIBS = ["ragmesh", "ragmesh_common", "ragmesh_dev", "ragmesh_cli"]
LONG_FUNCTION_LINES = 80


def _root(module: str) -> str:
    return module.split(".", 1)[0]


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if i < len(targets):
                work.append((node, i + 1))
                target = targets[i]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def _arrows(graph: grimp.ImportGraph) -> tuple[list[str], list[str]]:
    """(library → service imports, service → other service imports), as `importer -> imported` lines."""
    to_services, between = [], []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            source, target = _root(importer), _root(imported)
            if target not in SERVICES or source == target:
                continue
            line = f"{importer} -> {imported}"
            if source in LIBS:
                to_services.append(line)
            elif source in SERVICES:
                between.append(line)
    return to_services, between


def long_functions(limit: int = LONG_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(`path:line function`, lines) of every production function longer than `limit` lines, longest first."""
    generated = ROOT / "libs" / "ragmesh_common" / "src" / "ragmesh"
    files = [*ROOT.glob("libs/*/src/**/*.py"), *ROOT.glob("services/*/src/**/*.py")]
    found = []
    for path in sorted(files):
        if generated in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", lines))
    return sorted(found, key=lambda item: (-item[1], item[0]))


def report() -> dict[str, object]:
    graph = grimp.build_graph(*SERVICES, *LIBS, cache_dir=None)
    circles = _circles(graph)
    to_services, between = _arrows(graph)
    long = long_functions()
    return {
        "import_circles": circles,
        "library_to_service_imports": to_services,
        "service_to_service_imports": between,
        "functions_over_80_lines": [{"function": name, "lines": lines} for name, lines in long],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    facts = report()
    if args.json:
        json.dump(facts, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    circles = facts["import_circles"]
    assert isinstance(circles, list)
    print(f"import circles: {len(circles)}")
    for circle in circles:
        print("  " + " <-> ".join(circle))
    for key, title in (
        ("library_to_service_imports", "imports from libraries into services"),
        ("service_to_service_imports", "imports between services"),
    ):
        lines = facts[key]
        assert isinstance(lines, list)
        print(f"{title}: {len(lines)}")
        for line in lines:
            print(f"  {line}")
    long = facts["functions_over_80_lines"]
    assert isinstance(long, list)
    print(f"production functions over {LONG_FUNCTION_LINES} lines: {len(long)}")
    for item in long:
        print(f"  {item['lines']:4d}  {item['function']}")


if __name__ == "__main__":
    main()
