"""Puts libs/*/src and services/*/src on the virtualenv's path (a .pth file), and writes a launcher in the
virtualenv's bin folder for each console script a package declares (`[project.scripts]`, e.g. `ragmesh`).

It does what `pip install -e` of each package would do, without a build step per package;
the per-package pyproject.toml files are what container images install from.
"""

from __future__ import annotations

import site
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_paths(root: Path) -> list[str]:
    return sorted(str(p) for p in [*root.glob("libs/*/src"), *root.glob("services/*/src")] if p.is_dir())


def console_scripts(root: Path) -> dict[str, str]:
    """name -> `module:function` from every package's pyproject.toml."""
    scripts: dict[str, str] = {}
    for pyproject in sorted([*root.glob("libs/*/pyproject.toml"), *root.glob("services/*/pyproject.toml")]):
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        scripts.update(project.get("scripts", {}))
    return scripts


def write_launchers(scripts: dict[str, str], bin_dir: Path, python: str) -> list[Path]:
    """The same launcher pip writes for an entry point: import the object and exit with what it returns."""
    written = []
    for name, target in scripts.items():
        module, _, attribute = target.partition(":")
        path = bin_dir / name
        path.write_text(
            f"#!{python}\nimport sys\nfrom {module} import {attribute.split('.')[0]}\n\n"
            f'if __name__ == "__main__":\n    sys.exit({attribute}())\n'
        )
        path.chmod(0o755)
        written.append(path)
    return written


def main() -> None:
    paths = source_paths(ROOT)
    target = Path(site.getsitepackages()[0]) / "ragmesh-dev.pth"
    target.write_text("\n".join(paths) + "\n")
    print(f"{target}: {len(paths)} source folders", file=sys.stderr)
    launchers = write_launchers(console_scripts(ROOT), Path(sysconfig.get_path("scripts")), sys.executable)
    print(f"console scripts: {', '.join(str(p) for p in launchers) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()
