"""Standard YAML in the configs: anchors and merge keys (`<<: *gpu`) for a fleet of alike hosts,
a key written beside a merge overriding it; a key written twice in one mapping still refused."""
import pytest

from scalebench.core.config import ConfigError
from scalebench.core.config.fleet import load_fleet

FLEET = """\
night_budget_minutes: 480
hosts:
  - &gpu {name: dgx-a, kind: gpu, queue: dgx-a, device_ids: ["0", "1", "2", "3"], threads_per_device: 8}
  - <<: *gpu
    name: dgx-b
    queue: dgx-b
"""


def test_merge_keys_build_alike_hosts(tmp_path):
    (tmp_path / "fleet.yaml").write_text(FLEET)
    a, b = load_fleet(tmp_path / "fleet.yaml").hosts
    assert (b.name, b.queue, b.device_ids, b.threads_per_device) == ("dgx-b", "dgx-b", a.device_ids, 8)


def test_a_key_written_twice_beside_a_merge_is_still_refused(tmp_path):
    (tmp_path / "fleet.yaml").write_text(FLEET + "    queue: dgx-c\n")
    with pytest.raises(ConfigError, match="key 'queue' is written twice, at lines 6 and 7"):
        load_fleet(tmp_path / "fleet.yaml")
