"""What a non-editable install ships: every subpackage, and the Hydra configs inside the package."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_subpackage_and_config_group_is_listed_for_the_wheel():
    line = re.search(r"^packages = (\[.*\])", (REPO / "pyproject.toml").read_text(), re.M).group(1)
    listed = set(ast.literal_eval(line))
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "gpt1").rglob("__init__.py")}
    groups = {".".join(("gpt1", *p.parent.relative_to(REPO).parts)) for p in (REPO / "conf").rglob("*.yaml")}
    assert on_disk | groups == listed


def test_the_configs_ship_as_gpt1_conf():
    from importlib.resources import files

    conf = files("gpt1.conf")
    assert conf.joinpath("pretrain.yaml").is_file() and conf.joinpath("experiment", "quickstart.yaml").is_file()
