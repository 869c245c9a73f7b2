import json
import re
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml

ROOT = Path(__file__).parents[2]
SCHEMA = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())


def test_cluster_yaml_validates_against_rays_schema():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    jsonschema.validate(config, SCHEMA)
    gpu_nodes = [t for t in config["available_node_types"].values() if t["resources"].get("GPU", 0) > 0]
    assert gpu_nodes, "the cluster needs GPU workers"
    assert any("pip install" in c and "qrsearch" in c for c in config["setup_commands"])


def test_cluster_runs_rays_image_pinned_to_the_cluster_extras_ray():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()
    pinned = re.search(r'"ray\[default\]==([0-9.]+)"', pyproject)
    assert pinned, "the cluster extra pins ray[default]"
    image = config["docker"]["image"]
    # Ray's own image, the same ray version, and a Python qrsearch supports (>= 3.11).
    assert image == f"rayproject/ray:{pinned[1]}-py312-gpu"
    for node in config["available_node_types"].values():
        assert "0a1b2c3d" not in node["node_config"].get("ImageId", "")  # no placeholder AMI
    starts = config["head_start_ray_commands"] + config["worker_start_ray_commands"]
    assert all("RAY_AUTH_MODE=token" in c for c in starts if "ray start" in c)


def test_the_schema_check_catches_typos():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["max_worker"] = config.pop("max_workers")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, SCHEMA)
