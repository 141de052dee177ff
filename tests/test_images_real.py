"""The configuration names scenarios are validated against are the brokers' own: each
plug-in's committed config-keys.json is what its broker, in the image built here, says."""
from __future__ import annotations

import json

import pytest

from harness import brokers

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("name", brokers.KINDS)
def test_committed_config_keys_are_the_brokers_own(name):
    plugin = brokers.get(name)
    dumped = plugin.dump_config_keys(f"{plugin.image.repo}:latest")
    committed = json.loads(plugin.settings_model.keys_file.read_text())
    assert dumped == committed, f"regenerate harness/brokers/{name}/config-keys.json from the image"
    assert len(committed["broker"]) > 100 and committed["version"]
