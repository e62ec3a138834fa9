"""Faster R-CNN ResNet50-FPN (TensorFlow Model Garden, official.vision) + VOC2007 under
tf.distribute.MirroredStrategy: N GPUs on GPU hosts, N logical CPU devices on CPU hosts.

Model Garden's own `fasterrcnn_resnetfpn_coco` experiment with what a from-scratch VOC run
needs: float32, 21 classes (20 + background), the cell's image size, no checkpoint download
(`model.init_checkpoint` may name a local checkpoint), synchronised BatchNorm off (it doubles
graph tracing on CPU; recorded), ROI sampling scaled down below 256 px, the LR from our policy
as a constant (Model Garden's 500-step warm-up and COCO step schedule would leave a short run at
a tiny LR). The fully resolved Model Garden config is saved beside the result.

An epoch is one pass over the train split: steps per epoch = floor(images / global batch), at
least 1, the remainder dropped and recorded (`timing.epoch`). The VOC XML is converted to
tf.Example TFRecords once per dataset fingerprint (`voc_tfrecord`, outside the timed region).
Training runs Model Garden's `task.train_step` inside `strategy.run` in our loop, so the data
wait is timed apart (the batch is taken from the distributed iterator here); the all-reduce
happens inside the compiled step, so sync is null, as for the Keras trainer. Evaluation runs
after training on the test split; the raw detections are saved as detections.jsonl and scored
by the kit against the XML ground truth (difficult objects ignored).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from scalebench_kit import voc_det
from scalebench_kit.contract import write_json_atomic
from scalebench_kit.evaluation import Evaluations
from scalebench_kit.gpu_monitor import sample_gpus
from scalebench_kit.metrics import detection_scores
from scalebench_kit.names import COMPUTE_DTYPE
from scalebench_kit.precision import PrecisionError, record, requested
from scalebench_kit.runtime import Cell, Progress, StepTimer, combine_ranks, epoch_plan, main_guard, system_fingerprint
from trainers.resnet50_keras import make_strategy
from trainers.voc_tfrecord import convert_cached

DETECTIONS_FILE = "detections.jsonl"
CONFIG_FILE = "model_garden_config.json"
SCORE_THRESHOLD = 0.5      # precision/recall/IoU count detections at or above this score; mAP uses all
CACHE_ENV = "SCALEBENCH_CACHE_DIR"
BREAKDOWN_METHOD = {
    "data_wait_s": "next() on the distributed tf.data iterator (Model Garden's decoder and parser), including "
                   "the copy to the replicas",
    "compute_s": "Model Garden's train_step under strategy.run, compiled (forward, losses, backward, all-reduce, "
                 "optimiser)",
    "sync_s": "not exposed: MirroredStrategy's all-reduce runs inside the compiled step and is counted in compute",
    "other_s": "the loop between steps: unattributed",
    "epoch_fixed_s": "none: the iterator runs across epochs (repeat), so no per-epoch set-up",
}


def experiment(cell: Cell, record_dir: Path):
    from official.core import exp_factory
    from official.modeling import optimization
    import official.vision  # noqa: F401  (registers the vision experiments)

    train, data, model = cell.training, cell.spec["data"], cell.spec["model"]
    size = data.get("image_size") or 512
    cfg = exp_factory.get_exp_config("fasterrcnn_resnetfpn_coco")
    cfg.runtime.mixed_precision_dtype = COMPUTE_DTYPE[requested(cell.spec)]  # Model Garden's own switch
    t = cfg.task
    t.init_checkpoint = model.get("init_checkpoint")  # a local path or None: nothing is downloaded
    t.annotation_file = None
    t.use_coco_metrics = False
    t.model.num_classes = len(voc_det.CLASSES)  # 20 classes + background
    t.model.input_size = [size, size, 3]
    t.model.norm_activation.use_sync_bn = False
    if size <= 256:  # a small image has few objects and anchors: sample fewer ROIs
        t.model.roi_sampler.num_sampled_rois = 128
        t.model.roi_generator.num_proposals = 256
        t.model.roi_generator.test_num_proposals = 256
    for d, split, batch in ((t.train_data, "train", train["global_batch"]), (t.validation_data, "test", 1)):
        d.input_path = str(record_dir / f"{split}.tfrecord")
        d.global_batch_size = batch
        d.dtype = "float32"
    t.train_data.shuffle_buffer_size = 256
    t.train_data.drop_remainder = True  # every batch full, as the kit's plan (full_batches) counts
    t.train_data.seed = cell.spec["cell"]["seed"]
    cfg.trainer.optimizer_config = optimization.OptimizationConfig({
        "optimizer": {"type": "sgd", "sgd": {"momentum": 0.9}},
        "learning_rate": {"type": "constant", "constant": {"learning_rate": train["lr"]}},
    })
    return cfg


def set_precision(tf, cell: Cell, cfg) -> tuple[str, dict]:
    """Model Garden's policy from `runtime.mixed_precision_dtype` (its train driver's call, made here
    because this trainer runs its own loop) and TensorFlow's TF32 switch."""
    from official.modeling import performance

    precision = requested(cell.spec)
    if precision in ("tf32", "fp16") and cell.devices["kind"] != "gpu":
        raise PrecisionError(f"{precision} needs a CUDA device; this CPU twin trains in fp32")
    performance.set_mixed_precision_policy(cfg.runtime.mixed_precision_dtype)
    tf.config.experimental.enable_tensor_float_32_execution(precision != "fp32")
    return precision, {"runtime.mixed_precision_dtype": cfg.runtime.mixed_precision_dtype,
                       "tensor_float_32": precision != "fp32", "loss_scale": precision == "fp16"}


def main() -> None:
    cell = Cell()
    cell.events.log("init_start")
    import tensorflow as tf
    from official.core import task_factory

    train, data = cell.training, cell.spec["data"]
    tf.keras.utils.set_random_seed(cell.spec["cell"]["seed"])
    strategy, device_names = make_strategy(tf, cell.devices)
    replicas = strategy.num_replicas_in_sync
    if train["global_batch"] != train["per_device_batch"] * replicas:
        raise RuntimeError(f"global batch {train['global_batch']} != per-device batch {train['per_device_batch']} "
                           f"x {replicas} replicas")

    # prepare (outside the timed region): read and check every annotation, convert once
    t_prep = time.perf_counter()
    splits = {"train": voc_det.read_split(data["path"], "trainval", data.get("train_limit")),
              "test": voc_det.read_split(data["path"], "test", data.get("test_limit"))}
    cache = Path(os.environ.get(CACHE_ENV, "/cache"))
    if not os.access(cache, os.W_OK):
        cache = Path("/tmp/scalebench-cache")
    record_dir, source_ids, cached = convert_cached(tf, splits, data["fingerprint"], cache)
    # Model Garden's input reader repeats the split and drops no batch short: every step a full
    # batch, so an epoch is ceil(N / batch) of them and the stream runs on into the next pass
    plan = epoch_plan(len(splits["train"]), train["global_batch"], train.get("max_steps_per_epoch"),
                      shards=replicas, full_batches=True)
    prepare_s = time.perf_counter() - t_prep
    cell.events.log("data_ready", len(splits["train"]), test_images=len(splits["test"]), cached=cached,
                    prepare_s=round(prepare_s, 3), **plan)
    if plan["repeated_images"]:
        print(f"epoch: {plan['train_images']} images / global batch {plan['global_batch']} = "
              f"{plan['steps_per_epoch']} full steps, {plan['repeated_images']} images from the next pass", flush=True)

    cfg = experiment(cell, record_dir)
    write_json_atomic(cell.results_dir / CONFIG_FILE, cfg.as_dict())
    precision, switches = set_precision(tf, cell, cfg)
    task = task_factory.get_task(cfg.task)
    with strategy.scope():
        model = task.build_model()
        task.initialize(model)
        optimizer = task.create_optimizer(cfg.trainer.optimizer_config, cfg.runtime)  # loss-scaled for float16
    params = int(model.count_params())
    size = cfg.task.model.input_size
    endpoints = model.backbone(tf.zeros([1, *size]), training=False)  # what the backbone computes in
    level = sorted(endpoints)[0]
    observed = record(precision, endpoints[level].dtype.name, f"backbone endpoint {level}", switches)
    batches = iter(strategy.distribute_datasets_from_function(lambda ctx: task.build_inputs(cfg.task.train_data, ctx)))

    @tf.function
    def train_step(inputs):
        logs = strategy.run(task.train_step, args=(inputs, model, optimizer))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, logs[task.loss], axis=None)

    cell.events.log("model_ready", params, replicas=replicas, strategy=type(strategy).__name__)
    setup_s = cell.elapsed()
    cell.events.log("init_stop", setup_s)

    delay = cell.test_hooks.get("data_delay_s")
    timer = StepTimer(train["warmup_steps"], Progress(plan["steps_per_epoch"] * train["epochs"], train["global_batch"]))
    epoch_s, loss_curve, step_losses = [], [], []
    evals = Evaluations(cell.events, train)
    truths = voc_det.truths(splits["test"])
    gpus = sample_gpus(cell.devices["kind"], list(range(replicas)))
    with gpus:
        for epoch in range(train["epochs"]):
            t_epoch = time.perf_counter()
            cell.events.log("epoch_start", epoch + 1)
            timer.epoch_fixed(0.0)
            timer.start()
            losses = []
            for _ in range(plan["steps_per_epoch"]):
                t_fetch = time.perf_counter()
                if delay:
                    time.sleep(delay)
                inputs = next(batches)
                t_data = time.perf_counter()
                loss = float(train_step(inputs))  # float(): waits for the step
                timer.step_done(data_wait_s=t_data - t_fetch, compute_s=time.perf_counter() - t_data, sync_s=None)
                losses.append(loss)
                if not np.isfinite(loss):
                    raise FloatingPointError(f"loss is {loss} at step {len(timer.steps)}")
                if len(timer.steps) == timer.warmup_steps:
                    cell.events.log("warmup_stop", timer.warmup_s)
            epoch_s.append(time.perf_counter() - t_epoch)
            step_losses += losses
            loss_curve.append(float(np.mean(losses)))
            cell.events.log("epoch_stop", epoch + 1, loss=loss_curve[-1], seconds=epoch_s[-1])
            evals.after_epoch(epoch + 1, sum(epoch_s), lambda: detection_scores(
                predict(tf, task, model, cfg, source_ids["test"]), truths, cfg.task.model.num_classes,
                score_threshold=SCORE_THRESHOLD))
    cell.events.log("train_stop", timer.train_s)

    def final_scores() -> dict:
        detections = predict(tf, task, model, cfg, source_ids["test"])
        with (cell.results_dir / DETECTIONS_FILE).open("w") as fh:
            for d in detections:
                fh.write(json.dumps(d) + "\n")
        return detection_scores(detections, truths, cfg.task.model.num_classes, score_threshold=SCORE_THRESHOLD)

    metrics = evals.final(sum(epoch_s), final_scores)

    mine = timer.summary(0)
    cell.events.log("step_breakdown", mine["step_s"], **mine)
    breakdown = combine_ranks([mine], BREAKDOWN_METHOD)
    if gpus.summary():
        breakdown["gpu"] = gpus.summary()
    build = tf.sysconfig.get_build_info()
    system = system_fingerprint("tensorflow", tf.__version__, model_garden="2.20.0", cuda=build.get("cuda_version"),
                                cudnn=build.get("cudnn_version"), topology=cell.devices.get("topology"),
                                **gpus.fingerprint())
    cell.finish(system=system, world_size=replicas, device_names=device_names, setup_s=setup_s, timer=timer,
                epoch_s=epoch_s, eval_s=evals.seconds, loss_curve=loss_curve, metrics=metrics, breakdown=breakdown,
                evaluations=evals.rows, model={"parameters": params, "architecture": "FasterRCNN-ResNet50-FPN",
                       "strategy": type(strategy).__name__, "resolved_config_file": CONFIG_FILE,
                       "sync_batchnorm": False},
                extra={"detections_file": DETECTIONS_FILE, "step_losses": [round(x, 5) for x in step_losses],
                       "epoch": plan, "prepare_s": round(prepare_s, 3)}, precision=observed)


def predict(tf, task, model, cfg, source_ids: dict[int, str]) -> list[dict]:
    """Raw detections on the test split in original image pixels, [xmin, ymin, xmax, ymax]."""
    ds = task.build_inputs(cfg.task.validation_data)

    @tf.function
    def forward(images, labels):
        return model(images, anchor_boxes=labels["anchor_boxes"], image_shape=labels["image_info"][:, 1, :],
                     training=False)

    out = []
    for images, labels in ds:
        o = forward(images, labels)
        scale = labels["image_info"][:, 2, :].numpy()  # (y, x) scale from the original to the model input
        ids = labels["groundtruths"]["source_id"].numpy()
        for b in range(images.shape[0]):
            n = int(o["num_detections"][b])
            boxes = o["detection_boxes"][b, :n].numpy() / np.tile(scale[b], 2)
            for (y1, x1, y2, x2), c, s in zip(boxes, o["detection_classes"][b, :n].numpy(),
                                              o["detection_scores"][b, :n].numpy()):
                out.append({"image_id": source_ids[int(ids[b])], "label": int(c), "score": round(float(s), 5),
                            "bbox": [round(float(v), 2) for v in (x1, y1, x2, y2)]})
    return out


if __name__ == "__main__":
    main_guard(main)
