"""ResNet50 + Keras + CIFAR-10 under tf.distribute.MirroredStrategy.

One script for 1..N devices: N GPUs on GPU hosts (the leased ones, all that are visible), N
logical CPU devices on CPU hosts, so the same replica/all-reduce path runs in tests.
Scaling and LR policy come from cell.json: global batch = per-device batch x replicas (weak)
or fixed (strong); lr = base_lr x global_batch / reference_batch (linear rule).
Warm-up steps are timed apart from steady training; evaluation (precise BatchNorm statistics
over a few training batches, then prediction on the test split) is timed on its own, after
training and, when the cell asks (eval_each_epoch: time to accuracy), after every epoch.
Every epoch is a pass over the whole split (scalebench_kit.epochs, `epoch_dataset`).
Precision (cell.json training.precision): Keras' global dtype policy (mixed_bfloat16 /
mixed_float16, loss-scaled by Keras for float16) and TensorFlow's TF32 switch; the softmax
runs in float32 whatever the policy, and an inner convolution's output dtype is recorded.

Time breakdown (scalebench_kit.timing): Keras' train function runs a plain Python iterator's
batches through its compiled step one at a time, so the trainer takes each batch from the
distributed iterator itself (data wait, including the copy to the replicas) and hands it to
Keras' own compiled step (compute). MirroredStrategy's all-reduce runs inside that compiled
step and TF does not expose its time: sync is null and counted in compute, as the contract says.
"""
from __future__ import annotations

import time

from scalebench_kit import cifar10
from scalebench_kit.evaluation import Evaluations
from scalebench_kit.gpu_monitor import sample_gpus
from scalebench_kit.metrics import macro_precision_recall
from scalebench_kit.precision import keras_observed, keras_policy, record, requested
from scalebench_kit.runtime import Cell, Progress, StepTimer, combine_ranks, epoch_plan, main_guard, system_fingerprint

BREAKDOWN_METHOD = {
    "data_wait_s": "next() on the distributed tf.data iterator (prefetch 2), including the copy to the replicas",
    "compute_s": "Keras' compiled train step under MirroredStrategy (forward, backward, all-reduce, optimiser)",
    "sync_s": "not exposed: MirroredStrategy's all-reduce runs inside the compiled step and is counted in compute",
    "other_s": "Keras' loop and callbacks between steps: unattributed",
    "epoch_fixed_s": "per epoch: from the epoch's start to its first batch request (iterator set-up)",
}
OBSERVED_LAYER = "conv3_block1_1_conv"  # an inner convolution: its output dtype is what the policy ran


def time_each_fetch(tf, model, on_step, delay_s=None):
    """Wrap Keras' train function: fetch the batch here (timed as data wait), then run it through
    Keras' unchanged compiled step via its plain-iterator branch (timed as compute)."""
    import numpy as np

    model.make_train_function()
    inner = model.train_function

    def train_function(iterator):
        t_fetch = time.perf_counter()
        if delay_s:
            time.sleep(delay_s)
        batch = next(iterator)
        t_data = time.perf_counter()
        out = inner(iter([batch]))
        tf.nest.map_structure(np.asarray, out)  # wait for the step's results (asynchronous on GPUs)
        on_step(t_data - t_fetch, time.perf_counter() - t_data)
        return out

    model.train_function = train_function


def make_strategy(tf, devices: dict):
    n = devices["count"]
    if devices["kind"] == "cpu":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
        names = [d.name for d in tf.config.list_logical_devices("CPU")][:n]
    else:
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) != n:
            raise RuntimeError(f"cell asked for {n} GPUs (ids {devices['ids']}) but the container sees {len(gpus)}")
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
        names = [d.name for d in tf.config.list_logical_devices("GPU")]
    return tf.distribute.MirroredStrategy(devices=names), names


PRECISE_BN_BATCHES = 10  # training batches averaged into the BatchNorm statistics before evaluation


def precise_bn(tf, keras, model, batches) -> int:
    """Recompute every BatchNorm layer's moving mean and variance as the average of the batch
    statistics of a few training batches (precise BN, as in pycls and Detectron). With Keras'
    momentum of 0.99 the moving statistics after a short run are still mostly their initial
    values, so evaluation would normalise with the wrong statistics and predict one class.
    Momentum 0 makes each forward pass leave exactly its batch's statistics, which are summed."""
    import numpy as np

    layers = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    saved = [layer.momentum for layer in layers]
    sums = [[np.zeros(layer.moving_mean.shape), np.zeros(layer.moving_variance.shape)] for layer in layers]
    forward = tf.function(lambda x: model(x, training=True))  # traced once: eager ResNet50 is 10x slower
    n = 0
    try:
        for layer in layers:
            layer.momentum = 0.0
        for x, _ in batches:
            forward(x)
            n += 1
            for total, layer in zip(sums, layers):
                total[0] += np.asarray(layer.moving_mean)
                total[1] += np.asarray(layer.moving_variance)
        for (mean, var), layer in zip(sums, layers):
            layer.moving_mean.assign(mean / n)
            layer.moving_variance.assign(var / n)
    finally:
        for layer, momentum in zip(layers, saved):
            layer.momentum = momentum
    return n


def epoch_dataset(tf, x, y, plan: dict, seed: int):
    """Batches of the kit's epoch plan, one pass after another: a reshuffled pass over the whole
    split, padded by the plan's repeats (the split's first images, fewer than one per replica) so
    the smaller last batch splits evenly over the replicas; a capped epoch takes full batches."""
    base = tf.data.Dataset.from_tensor_slices((x, y))
    one_pass = base.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    if plan.get("capped_by_max_steps_per_epoch"):
        batches = one_pass.batch(plan["global_batch"], drop_remainder=True)
    else:
        batches = one_pass.concatenate(base.take(plan.get("repeated_images", 0))).batch(plan["global_batch"])
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return batches.repeat().prefetch(2).with_options(options)


def main() -> None:
    cell = Cell()
    cell.events.log("init_start")
    import tensorflow as tf
    import keras
    import numpy as np

    spec, train = cell.spec, cell.training
    keras.utils.set_random_seed(spec["cell"]["seed"])
    precision = requested(spec)
    switches = keras_policy(tf, keras, precision, gpu=cell.devices["kind"] == "gpu")
    strategy, device_names = make_strategy(tf, cell.devices)
    replicas = strategy.num_replicas_in_sync
    global_batch = train["global_batch"]
    if global_batch != train["per_device_batch"] * replicas:
        raise RuntimeError(f"global batch {global_batch} != per-device batch {train['per_device_batch']} x {replicas} replicas")

    data = spec["data"]
    x_train, y_train = cifar10.read_split(data["path"], "train", data.get("train_limit"))
    x_test, y_test = cifar10.read_split(data["path"], "test", data.get("test_limit"))
    mean, std = x_train.mean(axis=(0, 1, 2)), x_train.std(axis=(0, 1, 2)) + 1e-6
    prep = lambda x: ((x.astype("float32") - mean) / std).astype("float32")  # noqa: E731
    if len(x_train) < global_batch:
        raise RuntimeError(f"train split has {len(x_train)} images, fewer than one global batch of {global_batch}")
    plan = epoch_plan(len(x_train), global_batch, train.get("max_steps_per_epoch"), shards=replicas)
    steps_per_epoch = plan["steps_per_epoch"]
    ds = epoch_dataset(tf, prep(x_train), y_train, plan, spec["cell"]["seed"])
    cell.events.log("data_ready", len(x_train), test_images=len(x_test))

    with strategy.scope():
        body = keras.applications.ResNet50(weights=None, input_shape=x_train.shape[1:], classes=10,
                                           classifier_activation=None)
        probs_out = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(body.output)
        model = keras.Model(body.inputs, probs_out, name="resnet50")
        # no gradient clipping, as in the study's trainer: clipping at norm 1 held a short run at chance
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=train["lr"], momentum=0.9),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    params = int(model.count_params())
    observed = keras_observed(keras, model, OBSERVED_LAYER, prep(x_train[:2]))
    cell.events.log("model_ready", params, replicas=replicas, strategy=type(strategy).__name__)
    setup_s = cell.elapsed()
    cell.events.log("init_stop", setup_s)

    timer = StepTimer(train["warmup_steps"], Progress(steps_per_epoch * train["epochs"], global_batch))  # one process
    epoch_s: list[float] = []
    loss_curve: list[float] = []
    last: dict = {}

    def on_step(data_wait_s, compute_s):
        if last.pop("epoch_begin", None) is not None:
            timer.epoch_fixed(last["t_fetch"] - last["t_epoch"])
        last.update(data_wait_s=data_wait_s, compute_s=compute_s)

    time_each_fetch(tf, model, on_step, cell.test_hooks.get("data_delay_s"))

    class Timing(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t_epoch = time.perf_counter()
            cell.events.log("epoch_start", epoch + 1)
            last.update(epoch_begin=True, t_epoch=self.t_epoch)

        def on_train_batch_begin(self, batch, logs=None):
            if "epoch_begin" in last:  # the epoch's first step starts here: what came before is fixed cost
                last["t_fetch"] = time.perf_counter()
                timer.start()

        def on_train_batch_end(self, batch, logs=None):
            timer.step_done(data_wait_s=last["data_wait_s"], compute_s=last["compute_s"], sync_s=None)
            if len(timer.step_times) == timer.warmup_steps:
                cell.events.log("warmup_stop", timer.warmup_s)

        def on_epoch_end(self, epoch, logs=None):
            epoch_s.append(time.perf_counter() - self.t_epoch)
            loss_curve.append(float(logs["loss"]))
            cell.events.log("epoch_stop", epoch + 1, loss=loss_curve[-1], seconds=epoch_s[-1])

    def evaluate() -> dict:
        """Precise BN over a few training batches, then the whole test split once."""
        bn_batches = precise_bn(tf, keras, model, ds.take(min(PRECISE_BN_BATCHES, steps_per_epoch)))
        cell.events.log("precise_bn", bn_batches, images=bn_batches * global_batch)
        probs = model.predict(prep(x_test), batch_size=global_batch, verbose=0)
        return macro_precision_recall(y_test, np.argmax(probs, axis=1), num_classes=10)

    evals = Evaluations(cell.events, train)

    class EvaluateEachEpoch(keras.callbacks.Callback):
        """After Timing closed the epoch, so evaluation stays outside the timed region (time to
        accuracy); `evals` decides whether one is due."""
        def on_epoch_end(self, epoch, logs=None):
            evals.after_epoch(epoch + 1, sum(epoch_s), evaluate)

    gpus = sample_gpus(cell.devices["kind"], list(range(replicas)))
    with gpus:
        model.fit(ds, epochs=train["epochs"], steps_per_epoch=steps_per_epoch, verbose=2,
                  callbacks=[Timing(), EvaluateEachEpoch()])
    cell.events.log("train_stop", timer.train_s)

    metrics = evals.final(sum(epoch_s), evaluate)

    system = system_fingerprint("tensorflow", tf.__version__, keras=keras.__version__,
                                cuda=tf.sysconfig.get_build_info().get("cuda_version"),
                                cudnn=tf.sysconfig.get_build_info().get("cudnn_version"),
                                topology=cell.devices.get("topology"), **gpus.fingerprint())
    mine = timer.summary(0)
    cell.events.log("step_breakdown", mine["step_s"], **mine)
    breakdown = combine_ranks([mine], BREAKDOWN_METHOD)
    if gpus.summary():
        breakdown["gpu"] = gpus.summary()
    cell.finish(system=system, world_size=replicas, device_names=device_names, setup_s=setup_s, timer=timer,
                epoch_s=epoch_s, eval_s=evals.seconds, loss_curve=loss_curve, metrics=metrics, evaluations=evals.rows,
                breakdown=breakdown, extra={"epoch": plan},
                precision=record(precision, observed, OBSERVED_LAYER, switches),
                model={"parameters": params, "architecture": "ResNet50", "strategy": type(strategy).__name__})


if __name__ == "__main__":
    main_guard(main)
