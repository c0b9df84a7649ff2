"""Renders the ragmesh Helm chart offline (Helm v4 through helm-python-sdk; no helm binary, no cluster).

    python tools/render_chart.py                 # check: every golden render matches a fresh render
    python tools/render_chart.py --update        # rewrite helm/ragmesh/examples/*/rendered.yaml
    python tools/render_chart.py -f my.yaml      # print the manifests for a values file

Golden renders live in helm/ragmesh/examples/<scenario>/{values.yaml,rendered.yaml}; tests/chart checks them.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "ragmesh"
EXAMPLES = CHART / "examples"
RELEASE = "ragmesh"
NAMESPACE = "ragmesh"


def load_values(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: values must be a mapping")
    return data


def render(
    values: dict[str, Any] | None = None, *, chart: Path = CHART, release: str = RELEASE, namespace: str = NAMESPACE
) -> str:
    """The chart's manifests as one YAML stream, templates in path order (NOTES.txt left out)."""
    import helm_python as helm

    with helm.Chart.load(chart) as loaded:
        # the schema is checked explicitly: the render path alone is not guaranteed to enforce it
        loaded.validate_schema(values or {})
        manifests = loaded.render(values=values or {}, name=release, namespace=namespace, is_install=True)
    parts: list[str] = []
    for name in sorted(manifests):
        if name.endswith("NOTES.txt"):
            continue
        docs = [d.strip() for d in manifests[name].split("\n---") if d.strip() and d.strip() != "---"]
        for doc in docs:
            doc = doc.removeprefix("---").strip()
            if doc:
                parts.append(f"---\n# Source: {name}\n{doc}\n")
    return "".join(parts)


def documents(stream: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(stream) if d]


def scenarios() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if (p / "values.yaml").is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the golden renders")
    parser.add_argument("-f", "--values", type=Path, help="render this values file to stdout")
    args = parser.parse_args()
    if args.values:
        sys.stdout.write(render(load_values(args.values)))
        return 0
    stale = 0
    for scenario in scenarios():
        fresh = render(load_values(scenario / "values.yaml"))
        golden_path = scenario / "rendered.yaml"
        if args.update:
            golden_path.write_text(fresh)
            print(f"wrote {golden_path.relative_to(ROOT)}", file=sys.stderr)
            continue
        golden = golden_path.read_text() if golden_path.exists() else ""
        if golden != fresh:
            stale += 1
            sys.stdout.writelines(
                difflib.unified_diff(golden.splitlines(True), fresh.splitlines(True), str(golden_path), "fresh render")
            )
    if stale:
        print(f"{stale} golden render(s) stale: run python tools/render_chart.py --update", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
