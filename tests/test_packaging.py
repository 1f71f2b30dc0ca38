"""What a non-editable install ships: every subpackage, the Hydra configs and the sample data inside the package."""

import ast
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_subpackage_and_config_group_is_listed_for_the_wheel():
    line = re.search(r"^packages = (\[.*\])", (REPO / "pyproject.toml").read_text(), re.M).group(1)
    listed = set(ast.literal_eval(line))
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "gpt1").rglob("__init__.py")}
    groups = {".".join(("gpt1", *p.parent.relative_to(REPO).parts)) for p in (REPO / "conf").rglob("*.yaml")}
    assert on_disk | groups | {"gpt1.sample_data"} == listed


def test_the_configs_ship_as_gpt1_conf():
    from importlib.resources import files

    conf = files("gpt1.conf")
    assert conf.joinpath("pretrain.yaml").is_file() and conf.joinpath("experiment", "quickstart.yaml").is_file()


def test_a_wheel_ships_the_configs_and_the_sample_data(tmp_path):
    """``pip install .`` (not only -e) finds the sample: the wheel built from the source holds every file."""
    src = tmp_path / "src"
    for name in ("gpt1", "conf", "sample_data"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    build = "import setuptools.build_meta as b, sys; print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", build, str(tmp_path)], cwd=src, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set(zipfile.ZipFile(tmp_path / done.stdout.split()[-1]).namelist())
    manifest = json.loads((REPO / "sample_data/manifest.json").read_text())
    assert {f"gpt1/sample_data/{name}.gz" for name in manifest["files"]} <= names
    assert {"gpt1/sample_data/manifest.json", "gpt1/sample_data/README.md", "gpt1/conf/task/sentiment.yaml"} <= names
