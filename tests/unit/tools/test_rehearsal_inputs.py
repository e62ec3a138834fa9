"""What a rehearsal plants, refused with the flag named when malformed, and how a rehearsed
week's verdicts are held against the planted levels."""
import pytest

from scalebench.core.config import ConfigError
from scalebench.tools.rehearsal import AccuracyDrop, Rehearsal, planted_levels


@pytest.mark.parametrize("text, why", [("unet:4", "expected BENCHMARK:GPUS:POINTS"), ("unet:x:3", "expected"),
                                       ("unet:1:3", "GPUS >= 2"), ("unet:4:0", "POINTS between 0 and 80")])
def test_a_malformed_plant_is_refused_naming_the_flag(text, why):
    with pytest.raises(ConfigError, match=f"--plant-accuracy {text!r}: .*{why}"):
        AccuracyDrop.parse(text)


def test_planted_levels_lower_only_the_named_count_and_misses_name_each_verdict_that_differs():
    drop = AccuracyDrop.parse("unet:4:3")
    assert planted_levels("unet", [1, 2, 4], drop) == {1: 0.8, 2: 0.8, 4: pytest.approx(0.77)}
    assert planted_levels("other", [1, 4], drop) == {1: 0.8, 4: 0.8}
    r = Rehearsal("2026-12-03", plan=None, planted={}, weekly={"unet": None})
    r.accuracy["unet"] = {"planted": planted_levels("unet", [1, 2, 4], drop),
                          "verdicts": {"iou": {2: {"kind": "equivalent"}, 4: {"kind": "inconclusive"}}}}
    assert r.accuracy_misses() == ["unet iou at 4 GPUs: inconclusive (planted 0.77 against 0.8: worse)"]
    r.accuracy["unet"]["verdicts"]["iou"][4] = {"kind": "worse"}
    assert r.accuracy_misses() == []
