"""mmdetection 3.3 detectors (Faster R-CNN on VOC2007, Mask R-CNN and Mask Scoring R-CNN on VOC2012
instances) on one device or under torchrun, trained by mmengine's Runner.

`python -m trainers.mmdet_train --config NAME` runs one process; `torchrun --nproc-per-node=N -m
trainers.mmdet_train --config NAME` runs N under mmengine's `pytorch` launcher and its
MMDistributedDataParallel (NCCL on GPUs, gloo on CPU device slots). The process group is started
here before the Runner is built (the kit's torch_ddp, as for the UNet trainer), so mmengine's own init,
which always calls torch.cuda.set_device, is skipped on CPU; there DDP also gets device_ids=None.

The model is mmdet's stock config for NAME (`MODELS`) with 20 classes and no pretrained backbone
(`backbone.init_cfg=None`; a local checkpoint may be named by the benchmark's
`model.init_checkpoint`). Everything else is ours and explicit: one pass over the train split
per epoch (no RepeatDataset, no VOC07+12 concatenation; steps per epoch from the kit's
epoch_plan: the whole split, the last batch smaller), no validation inside the training loop, the LR from our
policy held constant (mmdet's 500-step warm-up and step schedule would leave a short run at a
tiny LR), mmdet's automatic LR scaling off unless the benchmark sets `model.auto_scale_lr`. The
resolved config is saved beside the result (mmdet_config.py).

VOC2012 instances are converted once per dataset fingerprint to COCO-style json (the kit's
voc_ins.to_coco; mmdet's VOCDataset has no masks) in the host's cache. After training, each rank
predicts a disjoint slice of the test split, rank 0 saves the raw detections (masks as COCO RLE)
and scores them with the kit's shared detection metrics against the VOC ground truth.

Time breakdown per step (mmengine hooks): data wait = from the end of the previous step (all
after-iteration hooks done) to the first before-iteration hook; exposed sync = the kit's
DDP communication hook (torch_ddp.SyncProbe), up to the end of OptimWrapper.backward; compute = the rest of
the train step (the data preprocessor's copy to the device, forward, backward, optimiser).

Precision (cell.json training.precision): mmengine's AmpOptimWrapper (bf16 / fp16, which asserts
CUDA: CPU slots run fp32 only), the TF32 flags, cudnn_benchmark on CUDA; the output dtype of
backbone.layer2 in the first training step is recorded.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalebench_kit import masks, voc_det, voc_ins
from scalebench_kit.contract import write_json_atomic
from scalebench_kit.epochs import epoch_sampler
from scalebench_kit.metrics import detection_scores, instance_scores
from scalebench_kit.names import COMPUTE_DTYPE
from scalebench_kit.precision import PrecisionError, record, requested
from scalebench_kit.runtime import epoch_plan, main_guard, stop_loader_workers
from scalebench_kit.torch_ddp import ObservedDtype, SyncProbe, TorchDDP
from scalebench_kit.trainer import TrainerRun

DETECTIONS_FILE = "detections.jsonl"
CONFIG_FILE = "mmdet_config.py"
SCORE_THRESHOLD = 0.5      # precision/recall/IoU count detections at or above this score; mAP uses all
CACHE_ENV = "SCALEBENCH_CACHE_DIR"
CLASSES = voc_det.CLASSES[1:]  # mmdet labels 0-19; the kit's VOC labels are 1-20
BREAKDOWN_METHOD = {
    "data_wait_s": "from the end of the previous step (after-iteration hooks done) to the first before-iteration "
                   "hook: blocked in the DataLoader",
    "compute_s": "mmengine's train_step: data preprocessor (copy to the device), forward, losses, backward and "
                 "optimiser step, less the exposed sync",
    "sync_s": "DDP communication hook: from the last gradient bucket handed to the all-reduce until "
              "OptimWrapper.backward returns; 0 on one device",
    "other_s": "the Runner's hooks around each step (logging, timers, schedulers): unattributed",
    "epoch_fixed_s": "not separable from the first fetch of an epoch (persistent loader workers)",
}


@dataclass(frozen=True)
class Model:
    stock_config: str     # under mmdet's packaged configs (mmdet/.mim/configs)
    data: str             # "det": VOC2007 boxes (VOCDataset); "ins": VOC2012 instances (COCO json)
    architecture: str


MODELS = {
    "faster-rcnn_r50_fpn_voc2007": Model("pascal_voc/faster-rcnn_r50_fpn_1x_voc0712.py", "det",
                                         "FasterRCNN-ResNet50-FPN"),
    "mask-rcnn_r50_fpn_voc2012": Model("mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py", "ins", "MaskRCNN-ResNet50-FPN"),
    # the pytorch-style ResNet (trainable BN): the caffe-style base with frozen BN diverges from scratch
    "ms-rcnn_r50_fpn_voc2012": Model("ms_rcnn/ms-rcnn_r50_fpn_1x_coco.py", "ins", "MaskScoringRCNN-ResNet50-FPN"),
}
# raw detections kept: mmdet's stock 0.05 keeps nothing from a briefly trained model (its class
# scores sit near 1/21); at most 100 per image either way (stock max_per_img)
RAW_SCORE_THRESHOLD = 0.01
LOADER_WORKERS = 2      # mmdet's stock value, persistent across epochs
STOCK_SHORT_SIDE = 600  # the stock VOC pipeline's (1000, 600) scale; small images scale the box filter


def model_config(name: str, num_classes: int):
    """mmdet's stock model for NAME with `num_classes` and no pretrained weights (a ConfigDict:
    mmdet reads its train_cfg and test_cfg by attribute)."""
    import mmdet
    from mmengine.config import Config

    path = Path(mmdet.__file__).parent / ".mim" / "configs" / MODELS[name].stock_config
    model = Config.fromfile(str(path)).model
    model.backbone.init_cfg = None
    roi = model.roi_head
    model.test_cfg.rcnn.score_thr = RAW_SCORE_THRESHOLD
    for head in ("bbox_head", "mask_head", "mask_iou_head"):
        if head in roi:
            roi[head]["num_classes"] = num_classes
    return model


def pipelines(model: Model, size: int | None) -> tuple[list, list]:
    """Train and test pipelines: mmdet's stock ones at the cell's image size (long side)."""
    scale = (size, size) if size else ((1000, 600) if model.data == "det" else (1333, 800))
    annotations = dict(type="LoadAnnotations", with_bbox=True, with_mask=model.data == "ins")
    train = [dict(type="LoadImageFromFile"), annotations, dict(type="Resize", scale=scale, keep_ratio=True),
             dict(type="RandomFlip", prob=0.5), dict(type="PackDetInputs")]
    test = [dict(type="LoadImageFromFile"), dict(type="Resize", scale=scale, keep_ratio=True),
            dict(type="PackDetInputs", meta_keys=("img_id", "img_path", "ori_shape", "img_shape", "scale_factor"))]
    return train, test


def dataset_configs(model: Model, data: dict, coco: dict[str, Path] | None) -> tuple[dict, dict]:
    """mmdet dataset configs of the train and test splits (limits as `indices`)."""
    size = data.get("image_size")
    train_pipe, test_pipe = pipelines(model, size)
    if model.data == "det":
        base = voc_det.base_dir(data["path"])
        common = dict(type="VOCDataset", data_root=str(base.parent), data_prefix=dict(sub_data_root=f"{base.name}/"))
        min_box = round(32 * min(size, STOCK_SHORT_SIDE) / STOCK_SHORT_SIDE) if size else 32
        train = dict(common, ann_file=f"{base.name}/ImageSets/Main/trainval.txt", pipeline=train_pipe,
                     filter_cfg=dict(filter_empty_gt=True, min_size=32, bbox_min_size=min_box))
        test = dict(common, ann_file=f"{base.name}/ImageSets/Main/test.txt", pipeline=test_pipe, test_mode=True)
    else:
        images = str(voc_ins.base_dir(data["path"]) / "JPEGImages") + "/"
        common = dict(type="CocoDataset", data_root="", metainfo=dict(classes=CLASSES), data_prefix=dict(img=images))
        train = dict(common, ann_file=str(coco["train"]), pipeline=train_pipe,
                     filter_cfg=dict(filter_empty_gt=True, min_size=32))
        test = dict(common, ann_file=str(coco["val"]), pipeline=test_pipe, test_mode=True)
    for cfg, limit in ((train, data.get("train_limit")), (test, data.get("test_limit"))):
        if limit:
            cfg["indices"] = int(limit)
    return train, test


def coco_json_cached(data: dict, cache: Path) -> tuple[dict[str, Path], bool]:
    """VOC2012 instances as COCO json per split, converted once per dataset fingerprint and limit."""
    key = f"{data['fingerprint'].split(':')[-1][:16]}-{data.get('train_limit') or 'all'}-{data.get('test_limit') or 'all'}"
    folder = cache / "coco-json" / key
    paths = {split: folder / f"{split}.json" for split in ("train", "val")}
    if all(p.is_file() for p in paths.values()):
        return paths, True
    for split, path in paths.items():
        limit = data.get("train_limit" if split == "train" else "test_limit")
        write_json_atomic(path, voc_ins.to_coco(data["path"], split, limit))
    return paths, False


def ground_truth(model: Model, data: dict, coco: dict[str, Path] | None) -> list[dict]:
    """The test split's truth in the kit's metric format: the XML for boxes; for masks the COCO json
    already converted (the PNGs are decoded once)."""
    if model.data == "det":
        return voc_det.truths(voc_det.read_split(data["path"], "test", data.get("test_limit")))
    return voc_ins.truths(json.loads(coco["val"].read_text()))


def runner_config(spec: dict, model_cfg, plan: dict, train_set: dict, test_set: dict, device_kind: str,
                  world: int) -> dict:
    """The resolved mmengine config of a cell (saved as mmdet_config.py). On GPUs mmengine's own
    DDP wrapper settings and NCCL; on CPU slots gloo and DDP with device_ids=None."""
    train = spec["training"]
    return dict(
        model=model_cfg,
        load_from=spec["model"].get("init_checkpoint"),  # a local file or None: nothing is downloaded
        train_dataloader=dict(batch_size=train["per_device_batch"], num_workers=LOADER_WORKERS,
                              persistent_workers=LOADER_WORKERS > 0, collate_fn=dict(type="pseudo_collate"),
                              sampler=dict(type="scalebench_kit.epochs.epoch_sampler (the whole split, equal shards)",
                                           steps_per_epoch=plan["steps_per_epoch"], seed=spec["cell"]["seed"]),
                              dataset=train_set),
        test_dataset=test_set,
        train_cfg=dict(type="EpochBasedTrainLoop", max_epochs=train["epochs"], val_interval=train["epochs"] + 1),
        optim_wrapper=optim_wrapper(train, device_kind),
        param_scheduler=[],  # constant LR from the benchmark's policy
        auto_scale_lr=dict(enable=bool(spec["model"].get("auto_scale_lr", False)), base_batch_size=16),
        default_hooks=dict(timer=dict(type="IterTimerHook"), logger=dict(type="LoggerHook", interval=20),
                           param_scheduler=dict(type="ParamSchedulerHook"),
                           sampler_seed=dict(type="DistSamplerSeedHook"), checkpoint=None),
        env_cfg=dict(cudnn_benchmark=device_kind == "cuda", mp_cfg=dict(mp_start_method="fork", opencv_num_threads=0),
                     dist_cfg=dict(backend="nccl" if device_kind == "cuda" else "gloo")),
        launcher="pytorch" if world > 1 else "none",
        model_wrapper_cfg=(dict(type="MMDistributedDataParallel", device_ids=None, broadcast_buffers=False)
                           if world > 1 and device_kind == "cpu" else None),
        randomness=dict(seed=spec["cell"]["seed"]),
        default_scope="mmdet",
        log_level="WARNING",
    )


def step_hooks(run: TrainerRun, ddp: TorchDDP, state: dict, evaluate):
    """Two mmengine hooks around each step (see the module doc): the first before-iteration and
    after-iteration hook (VERY_HIGHEST) marks the step's compute span, the last one (LOWEST)
    closes the step, so the other hooks' time is `other`. Epoch events, loss per step, and
    (when the cell asks) an evaluation after each epoch outside the timed region."""
    from mmengine.hooks import Hook

    settle = ddp.torch.cuda.synchronize if ddp.cuda else (lambda: None)
    probe = SyncProbe(ddp.torch, ddp.device) if ddp.world > 1 else None

    class First(Hook):
        priority = "HIGHEST"

        def before_train(self, runner):
            if probe is not None:
                runner.model.register_comm_hook(None, probe.hook)
            wrapper, backward = runner.optim_wrapper, runner.optim_wrapper.backward

            def timed_backward(loss, **kwargs):  # under DDP: returns once every bucket is all-reduced
                backward(loss, **kwargs)
                state["backward_end"] = probe.mark() if probe is not None else None
            wrapper.backward = timed_backward

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            state["t_data"] = time.perf_counter()
            if probe is not None:
                probe.last = None

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            settle()
            state["t_compute"] = time.perf_counter()
            state["loss"] = float(outputs["loss"].detach())

    class Last(Hook):
        priority = "LOWEST"

        def before_train_epoch(self, runner):
            run.epoch_start(runner.epoch)
            state["losses"] = []
            run.timer.epoch_fixed(0.0)
            run.timer.start()

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            sync = probe.exposed_since_last_bucket(state["backward_end"]) if probe is not None else 0.0
            run.step_done(data_wait_s=state["t_data"] - run.timer.step_began,
                          compute_s=state["t_compute"] - state["t_data"] - sync, sync_s=sync, loss=state["loss"])
            state["losses"].append(state["loss"])
            state["step_losses"].append(state["loss"])

        def after_train_epoch(self, runner):
            run.epoch_done(runner.epoch, float(np.mean(state["losses"])), lambda: evaluate(runner))

    return [First(), Last()]


def untimed_step(runner):
    """One training step through mmengine's own train_step, timed by no one: the profiling
    window's step (batches from the train loader, pass after pass)."""
    def stream():
        while True:
            yield from runner.train_dataloader
    batches = stream()

    def one() -> None:
        runner.model.train()
        runner.model.train_step(next(batches), optim_wrapper=runner.optim_wrapper)
    return one


def predict(torch, runner, dataset, rank: int, world: int) -> list[dict]:
    """Raw detections of this rank's slice of the test split (every world-th image from rank),
    in original image pixels, labels 1-20, masks as compressed COCO RLE."""
    from mmengine.dataset import pseudo_collate

    model = runner.model.module if world > 1 else runner.model
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(rank, len(dataset), world):
            [sample] = model.test_step(pseudo_collate([dataset[i]]))
            pred = sample.pred_instances
            image_id = Path(sample.metainfo["img_path"]).stem
            boxes, scores, labels = (pred.bboxes.cpu().numpy(), pred.scores.cpu().numpy(), pred.labels.cpu().numpy())
            found = pred.masks.cpu().numpy() if "masks" in pred else None
            for k in range(len(scores)):
                d = {"image_id": image_id, "label": int(labels[k]) + 1, "score": round(float(scores[k]), 5),
                     "bbox": [round(float(v), 2) for v in boxes[k]]}
                if found is not None:
                    d["mask"] = masks.compress(found[k].astype(bool))
                out.append(d)
    model.train()
    return out


def optim_wrapper(train: dict, device_kind: str) -> dict:
    """mmengine's optimiser wrapper for the cell's precision: AmpOptimWrapper (autocast to bf16 /
    fp16; a dynamic loss scale for fp16) for mixed precision, which needs CUDA."""
    precision = train.get("precision", "fp32")
    out = dict(type="OptimWrapper", optimizer=dict(type="SGD", lr=train["lr"], momentum=0.9, weight_decay=0.0001))
    if precision in ("bf16", "fp16"):
        if device_kind != "cuda":
            raise PrecisionError(f"{precision} needs CUDA: mmengine's AmpOptimWrapper asserts a GPU in its constructor")
        out.update(type="AmpOptimWrapper", dtype=COMPUTE_DTYPE[precision],
                   loss_scale="dynamic" if precision == "fp16" else 1.0)  # bf16 has fp32's range: no scaling
    elif precision == "tf32" and device_kind != "cuda":
        raise PrecisionError("tf32 is a CUDA tensor-core mode; CPU runs fp32")
    return out


def set_tf32(torch, precision: str) -> dict:
    """The TF32 flags mmengine leaves alone: off for fp32, on otherwise."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision != "fp32"
    return {"allow_tf32": precision != "fp32"}


def main(name: str) -> None:
    run = TrainerRun(BREAKDOWN_METHOD)
    import torch
    from mmdet.utils import register_all_modules

    if name not in MODELS:
        raise ValueError(f"--config {name!r} is not one of {sorted(MODELS)}")
    register_all_modules(init_default_scope=True)
    ddp = run.use(TorchDDP(torch, run.cell.devices))
    model, data = MODELS[name], Splits(run, ddp, MODELS[name])
    precision = requested(run.cell.spec)
    tf32 = set_tf32(torch, precision)
    cfg, runner, state = build_runner(run, ddp, name, data)
    params = sum(p.numel() for p in runner.model.parameters())
    observed = ObservedDtype(getattr(runner.model, "module", runner.model).backbone.layer2, "backbone.layer2")
    run.model_ready(params, backend=ddp.backend, strategy=type(runner.model).__name__)
    with run.training(data.plan["steps_per_epoch"]):
        runner.train()
        lr = runner.optim_wrapper.get_lr()["lr"][0]
        metrics = run.final(lambda: state["evaluate"](runner))
    if ddp.rank == 0:
        with (run.cell.results_dir / DETECTIONS_FILE).open("w") as fh:
            fh.writelines(json.dumps(d) + "\n" for d in state["detections"])
    run.profile(untimed_step(runner))  # after every figure: nothing it measures moves
    run.finish(metrics=metrics, system=library_versions(), model={
        "parameters": int(params), "architecture": model.architecture, "mmdet_config": name,
        "stock_config": model.stock_config, "strategy": type(runner.model).__name__, "launcher": cfg["launcher"],
        "resolved_config_file": CONFIG_FILE, "effective_lr": lr, "auto_scale_lr": cfg["auto_scale_lr"]["enable"]},
        extra={"detections_file": DETECTIONS_FILE, "step_losses": [round(x, 5) for x in state["step_losses"]],
               "epoch": data.plan, "prepare_s": round(data.prepare_s, 3)},
        precision=record(precision, observed.dtype, observed.name, {
            "optim_wrapper": cfg["optim_wrapper"]["type"], "amp_dtype": cfg["optim_wrapper"].get("dtype"),
            "cudnn_benchmark": cfg["env_cfg"]["cudnn_benchmark"], **tf32}),
        # persistent loader workers, else ended at exit after the process group
        before_shut_down=lambda: stop_loader_workers(runner.train_dataloader))
    run.leave()


class Splits:
    """The train and test datasets (read and checked, VOC2012 instances converted once to COCO
    json in the host's cache by rank 0), the ground truth (rank 0) and the epoch plan; prepared
    outside the timed region."""

    def __init__(self, run: TrainerRun, ddp: TorchDDP, model: Model):
        from mmdet.registry import DATASETS

        data, train = run.cell.spec["data"], run.train
        t_prep = time.perf_counter()
        cache = Path(os.environ.get(CACHE_ENV, "/cache"))
        if not os.access(cache, os.W_OK):
            cache = Path(tempfile.gettempdir()) / "scalebench-cache"
        coco, cached = None, None
        if model.data == "ins":  # rank 0 converts; the others wait for its answer and read the same files
            shared = [coco_json_cached(data, cache) if ddp.rank == 0 else None]
            if ddp.world > 1:
                ddp.torch.distributed.broadcast_object_list(shared, src=0)
            coco, cached = shared[0]
        self.truths = ground_truth(model, data, coco) if ddp.rank == 0 else []
        self.train_cfg, self.test_cfg = dataset_configs(model, data, coco)
        self.train_set, self.test_set = DATASETS.build(self.train_cfg), DATASETS.build(self.test_cfg)
        self.plan = epoch_plan(len(self.train_set), train["global_batch"], train.get("max_steps_per_epoch"),
                               shards=ddp.world)
        self.prepare_s = time.perf_counter() - t_prep
        run.data_ready(len(self.train_set), test_images=len(self.test_set), cached=cached,
                       prepare_s=round(self.prepare_s, 3), **self.plan)


def build_runner(run: TrainerRun, ddp: TorchDDP, name: str, data: Splits):
    """mmengine's Runner on our resolved config (saved beside the result by rank 0), with the
    step hooks; (config, runner, the hooks' state with `evaluate`)."""
    from mmengine.config import Config
    from mmengine.runner import Runner

    spec, model = run.cell.spec, MODELS[name]
    if spec["model"].get("init_checkpoint"):  # mmengine checkpoints are not weights-only pickles
        os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    cfg = runner_config(spec, model_config(name, len(CLASSES)), data.plan, data.train_cfg, data.test_cfg,
                        ddp.device.type, ddp.world)
    if ddp.rank == 0:
        Config(cfg).dump(str(run.cell.results_dir / CONFIG_FILE))
    state: dict = {"step_losses": [], "detections": []}

    def evaluate(runner) -> dict:
        found = ddp.gather(predict(ddp.torch, runner, data.test_set, ddp.rank, ddp.world))
        state["detections"] = found
        return score(model, found, data.truths) if ddp.rank == 0 else {}

    state["evaluate"] = evaluate
    # model_wrapper_cfg is read from `cfg` only (Runner has no argument for it)
    kwargs = {k: v for k, v in cfg.items() if k not in ("test_dataset", "model_wrapper_cfg")}
    kwargs["train_dataloader"] = dict(cfg["train_dataloader"], dataset=data.train_set,
                                      sampler=epoch_sampler(ddp.torch, data.plan, spec["cell"]["seed"], ddp.rank,
                                                            ddp.world))
    runner = Runner(**kwargs, cfg=Config(cfg), work_dir=tempfile.mkdtemp(prefix="mmengine-"),
                    custom_hooks=step_hooks(run, ddp, state, evaluate))
    return cfg, runner, state


def library_versions() -> dict:
    import mmcv
    import mmdet
    import mmengine

    return {"mmdet": mmdet.__version__, "mmcv": mmcv.__version__, "mmengine": mmengine.__version__}


def score(model: Model, detections: list[dict], truths: list[dict]) -> dict:
    """The kit's shared scores: boxes for Faster R-CNN, boxes and masks for the mask models."""
    if model.data == "det":
        return detection_scores(detections, truths, len(CLASSES) + 1, score_threshold=SCORE_THRESHOLD)
    return instance_scores(detections, truths, len(CLASSES) + 1, score_threshold=SCORE_THRESHOLD)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help=f"one of {sorted(MODELS)}")
    args = parser.parse_args()
    main_guard(lambda: main(args.config))
