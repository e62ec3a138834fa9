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
from scalebench_kit.metrics import detection_scores
from scalebench_kit.names import COMPUTE_DTYPE
from scalebench_kit.precision import PrecisionError, record, requested
from scalebench_kit.runtime import Cell, epoch_plan, main_guard
from scalebench_kit.tf_distribute import TFDistribute
from scalebench_kit.trainer import TrainerRun
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
    run = TrainerRun(BREAKDOWN_METHOD)
    import tensorflow as tf

    tf.keras.utils.set_random_seed(run.cell.spec["cell"]["seed"])
    fw = run.use(TFDistribute(tf, run.cell.devices))
    data = Splits(tf, run, fw.world)
    cfg = experiment(run.cell, data.record_dir)
    write_json_atomic(run.cell.results_dir / CONFIG_FILE, cfg.as_dict())
    precision, switches = set_precision(tf, run.cell, cfg)
    step = Step(tf, fw, cfg)
    observed = step.observed(precision, switches)
    run.model_ready(step.params, replicas=fw.world, strategy=fw.strategy)
    truths, classes = voc_det.truths(data.splits["test"]), cfg.task.model.num_classes

    predict = Predictor(tf, step.task, step.model, cfg, data.source_ids["test"])

    def score(save: bool = False) -> dict:
        found = predict()
        if save:
            with (run.cell.results_dir / DETECTIONS_FILE).open("w") as fh:
                fh.writelines(json.dumps(d) + "\n" for d in found)
        return detection_scores(found, truths, classes, score_threshold=SCORE_THRESHOLD)

    with run.training(data.plan["steps_per_epoch"]):
        for epoch in run.epochs():
            run.epoch_done(epoch, float(np.mean(step.epoch(run))), score)
    metrics = run.final(lambda: score(save=True))
    run.profile(lambda: float(step.train_step(next(step.batches))))  # after every figure, untimed
    run.finish(metrics=metrics, system={"model_garden": "2.20.0"}, precision=observed,
               model={"parameters": step.params, "architecture": "FasterRCNN-ResNet50-FPN",
                      "resolved_config_file": CONFIG_FILE, "sync_batchnorm": False},
               extra={"detections_file": DETECTIONS_FILE, "step_losses": [round(x, 5) for x in step.losses],
                      "epoch": data.plan, "prepare_s": round(data.prepare_s, 3)})
    run.leave()


class Splits:
    """Every annotation read and checked, converted once to TFRecords in the host's cache, and the
    epoch plan; prepared outside the timed region. Model Garden's input reader repeats the split
    and drops no batch short: every step a full batch, so an epoch is ceil(N / batch) of them and
    the stream runs on into the next pass."""

    def __init__(self, tf, run: TrainerRun, replicas: int):
        data, train = run.cell.spec["data"], run.train
        t_prep = time.perf_counter()
        self.splits = {"train": voc_det.read_split(data["path"], "trainval", data.get("train_limit")),
                       "test": voc_det.read_split(data["path"], "test", data.get("test_limit"))}
        cache = Path(os.environ.get(CACHE_ENV, "/cache"))
        if not os.access(cache, os.W_OK):
            cache = Path("/tmp/scalebench-cache")
        self.record_dir, self.source_ids, cached = convert_cached(tf, self.splits, data["fingerprint"], cache)
        self.plan = epoch_plan(len(self.splits["train"]), train["global_batch"], train.get("max_steps_per_epoch"),
                               shards=replicas, full_batches=True)
        self.prepare_s = time.perf_counter() - t_prep
        run.data_ready(len(self.splits["train"]), test_images=len(self.splits["test"]), cached=cached,
                       prepare_s=round(self.prepare_s, 3), **self.plan)
        if self.plan["repeated_images"]:
            print(f"epoch: {self.plan['train_images']} images / global batch {self.plan['global_batch']} = "
                  f"{self.plan['steps_per_epoch']} full steps, {self.plan['repeated_images']} images from the next "
                  "pass", flush=True)


class Step:
    """Model Garden's task, model and optimiser under the strategy, its compiled train step over
    the distributed input stream, and one epoch of timed steps."""

    def __init__(self, tf, fw: TFDistribute, cfg):
        from official.core import task_factory

        self.tf, self.cfg = tf, cfg
        strategy = fw.strategy_obj
        self.task = task = task_factory.get_task(cfg.task)
        with strategy.scope():
            self.model = model = task.build_model()
            task.initialize(model)
            optimizer = task.create_optimizer(cfg.trainer.optimizer_config, cfg.runtime)  # loss-scaled for float16
        self.params = int(model.count_params())
        self.batches = iter(strategy.distribute_datasets_from_function(
            lambda ctx: task.build_inputs(cfg.task.train_data, ctx)))
        self.losses: list[float] = []

        @tf.function
        def train_step(inputs):
            logs = strategy.run(task.train_step, args=(inputs, model, optimizer))
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, logs[task.loss], axis=None)
        self.train_step = train_step

    def observed(self, precision: str, switches: dict) -> dict:
        """What the backbone computes in (its first endpoint's dtype)."""
        endpoints = self.model.backbone(self.tf.zeros([1, *self.cfg.task.model.input_size]), training=False)
        level = sorted(endpoints)[0]
        return record(precision, endpoints[level].dtype.name, f"backbone endpoint {level}", switches)

    def epoch(self, run: TrainerRun) -> list[float]:
        delay, losses = run.cell.test_hooks.get("data_delay_s"), []
        run.timer.epoch_fixed(0.0)
        run.timer.start()
        for _ in range(run.steps_per_epoch):
            t_fetch = time.perf_counter()
            if delay:
                time.sleep(delay)
            inputs = next(self.batches)
            t_data = time.perf_counter()
            loss = float(self.train_step(inputs))  # float(): waits for the step
            run.step_done(data_wait_s=t_data - t_fetch, compute_s=time.perf_counter() - t_data, sync_s=None, loss=loss)
            losses.append(loss)
        self.losses += losses
        return losses


class Predictor:
    """Raw detections on the test split in original image pixels, [xmin, ymin, xmax, ymax]. The
    input pipeline and the traced forward pass are built once: each evaluation of a weekly run
    reuses them (a retrace cost about 20 s of CPU per evaluation)."""

    def __init__(self, tf, task, model, cfg, source_ids: dict[int, str]):
        self.ds, self.source_ids = task.build_inputs(cfg.task.validation_data), source_ids

        @tf.function
        def forward(images, labels):
            return model(images, anchor_boxes=labels["anchor_boxes"], image_shape=labels["image_info"][:, 1, :],
                         training=False)
        self.forward = forward

    def __call__(self) -> list[dict]:
        out = []
        for images, labels in self.ds:
            o = self.forward(images, labels)
            scale = labels["image_info"][:, 2, :].numpy()  # (y, x) scale from the original to the model input
            ids = labels["groundtruths"]["source_id"].numpy()
            for b in range(images.shape[0]):
                n = int(o["num_detections"][b])
                boxes = o["detection_boxes"][b, :n].numpy() / np.tile(scale[b], 2)
                for (y1, x1, y2, x2), c, s in zip(boxes, o["detection_classes"][b, :n].numpy(),
                                                  o["detection_scores"][b, :n].numpy()):
                    out.append({"image_id": self.source_ids[int(ids[b])], "label": int(c),
                                "score": round(float(s), 5), "bbox": [round(float(v), 2) for v in (x1, y1, x2, y2)]})
        return out


if __name__ == "__main__":
    main_guard(main)
