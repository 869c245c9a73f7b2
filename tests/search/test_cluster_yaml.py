import json
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


def test_the_schema_check_catches_typos():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["max_worker"] = config.pop("max_workers")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, SCHEMA)
