"""Every third-party module a package's code imports is a dependency it declares (in its pyproject.toml, or a
dependency of one it declares): a service image is built from its own declared dependencies
(`pip install ./libs/ragmesh_common ./services/<name>`), not from the one local virtualenv, so an undeclared
import works in `make test` and fails in the cluster."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = sorted([*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")])
# Imports a package may make without declaring them, and why.
UNDECLARED_ALLOWED = {
    # create_celery / the connectors' task contract: called only by the gateway and the ingestion worker,
    # which declare celery themselves
    "ragmesh-common": {"celery"},
}
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _parse(requirement: str) -> tuple[str, frozenset[str]]:
    found = _REQUIREMENT.match(requirement)
    assert found is not None, requirement
    extras = frozenset(e.strip() for e in (found.group(2) or "").split(",") if e.strip())
    return _name(found.group(1)), extras


@cache
def _local() -> dict[str, list[str]]:
    projects = {}
    for path in PROJECTS:
        project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
        projects[_name(project["name"])] = list(project.get("dependencies", []))
    return projects


def _installable(requirements: list[str]) -> set[str]:
    """The distributions installing `requirements` brings (with their extras), local packages read from source."""
    seen: set[tuple[str, frozenset[str]]] = set()
    stack = [_parse(r) for r in requirements]
    while stack:
        name, extras = stack.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if name in _local():
            stack += [_parse(r) for r in _local()[name]]
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            spec, _, marker = requirement.partition(";")
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)", marker)
            if extra is None or extra.group(1) in extras:
                stack.append(_parse(spec))
    return {name for name, _ in seen}


def _imports(source: Path) -> set[str]:
    """Top-level modules imported anywhere in the package's code (not under `if TYPE_CHECKING:`)."""
    found: set[str] = set()
    for path in source.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body
            for n in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and not m.startswith("ragmesh") and m != "__future__"}


@pytest.mark.parametrize("pyproject", PROJECTS, ids=[p.parent.name for p in PROJECTS])
def test_every_imported_module_is_a_declared_dependency(pyproject: Path) -> None:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    allowed = _installable(list(project.get("dependencies", [])))
    providers = metadata.packages_distributions()
    undeclared = {
        module: sorted(providers.get(module, []))
        for module in _imports(pyproject.parent / "src")
        if not {_name(d) for d in providers.get(module, [])} & allowed
        and module not in UNDECLARED_ALLOWED.get(_name(project["name"]), set())
    }
    assert not undeclared, f"{pyproject.relative_to(ROOT)}: imported but not declared (module: distributions)"
