import pytest

from scalebench.cell.validation import validate_result
from tests.support.samples import sample_cell, sample_contract

BOUNDS = {"precision": (0.0, 1.0), "recall": (0.0, 1.0)}


def test_a_good_result_meets_every_expectation():
    cell = sample_cell(gpus=2)
    verdict = validate_result(cell, sample_contract(cell), ["precision", "recall"], BOUNDS)
    assert verdict.success, verdict.failures
    assert verdict.checked > 20
    assert verdict.message(cell).endswith("expectations met")


@pytest.mark.parametrize("corrupt, expected", [
    (lambda d: d["metrics"].update(precision=float("nan")), "expect_column_values_to_not_be_null(column=precision) got null/NaN"),
    (lambda d: d["metrics"].update(precision=1.7), "expect_column_values_to_be_between(column=precision, min_value=0.0, max_value=1.0) got [1.7]"),
    (lambda d: d["metrics"].pop("recall"), "expect_column_to_exist(column=recall) got field missing"),
    (lambda d: d["devices"].update(world_size=1), "column=world_size, min_value=2.0, max_value=2.0) got [1]"),
    (lambda d: d["training"].update(global_batch=48), "column=global_batch, min_value=32.0, max_value=32.0) got [48]"),
    (lambda d: d["timing"].update(train_s=0.0), "column=train_s, min_value=0.0, strict_min=True) got [0.0]"),
    (lambda d: d["timing"]["breakdown"].update(compute_s=0.0), "column=step_parts_over_step, min_value=0.99"),
    (lambda d: d["timing"]["breakdown"]["per_rank"].pop(), "column_A=ranks, column_B=ranks_reported"),
    # fp32 asked, bfloat16 ran (e.g. a policy left on): not the cell it claims to be
    (lambda d: d["precision"].update(observed_dtype="bfloat16"),
     "expect_column_values_to_be_in_set(column=observed_dtype, value_set=['float32']) got ['bfloat16']"),
    (lambda d: d.pop("precision"), "expect_column_to_exist(column=observed_dtype) got field missing"),
])
def test_corrupted_results_are_caught_with_cell_expectation_and_value(corrupt, expected):
    cell = sample_cell(gpus=2)
    doc = sample_contract(cell)
    corrupt(doc)
    verdict = validate_result(cell, doc, ["precision", "recall"], BOUNDS)
    assert not verdict.success
    message = verdict.message(cell)
    assert message.startswith("cell g2-fp32-e3-r1 (2 GPUs · fp32 · 3 epochs · repeat 1) of resnet50_keras_cifar10: failed validation")
    assert expected in message, message


def test_benchmark_bounds_are_applied():
    cell = sample_cell(gpus=1)
    verdict = validate_result(cell, sample_contract(cell, precision=0.3), ["precision"], {"precision": (0.5, 1.0)})
    assert not verdict.success and "min_value=0.5" in verdict.failures[0]


def test_a_trainer_without_a_model_says_so_and_is_not_failed_for_it():
    from scalebench_kit.precision import not_observed

    cell = sample_cell(gpus=1, precision="bf16")
    doc = sample_contract(cell)
    doc["precision"] = not_observed("bf16", "none: the hold trainer runs no model")
    assert validate_result(cell, doc, ["precision", "recall"], BOUNDS).success
