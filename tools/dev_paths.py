"""Puts libs/*/src and services/*/src on the virtualenv's path (a .pth file).

It does what `pip install -e` of each package would do, without a build step per package;
the per-package pyproject.toml files are what container images install from.
"""
from __future__ import annotations

import site
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    paths = sorted(str(p) for p in [*ROOT.glob("libs/*/src"), *ROOT.glob("services/*/src")] if p.is_dir())
    target = Path(site.getsitepackages()[0]) / "ragmesh-dev.pth"
    target.write_text("\n".join(paths) + "\n")
    print(f"{target}: {len(paths)} source folders", file=sys.stderr)


if __name__ == "__main__":
    main()
