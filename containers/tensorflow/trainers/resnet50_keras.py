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
from scalebench_kit.metrics import macro_precision_recall
from scalebench_kit.precision import record, requested
from scalebench_kit.runtime import epoch_plan, main_guard
from scalebench_kit.tf_distribute import TFDistribute, keras_observed, keras_policy
from scalebench_kit.trainer import TrainerRun

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


PRECISE_BN_BATCHES = 10  # training batches averaged into the BatchNorm statistics before evaluation


class PreciseBN:
    """Recompute every BatchNorm layer's moving mean and variance as the average of the batch
    statistics of a few training batches (precise BN, as in pycls and Detectron). With Keras'
    momentum of 0.99 the moving statistics after a short run are still mostly their initial
    values, so evaluation would normalise with the wrong statistics and predict one class.
    Momentum 0 makes each forward pass leave exactly its batch's statistics, which are summed.
    The forward pass is traced once per cell (momentum 0 is baked into that trace), not once per
    evaluation of a weekly run."""

    def __init__(self, tf, keras, model):
        self.layers = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
        self.forward = tf.function(lambda x: model(x, training=True))  # eager ResNet50 is 10x slower

    def __call__(self, batches) -> int:
        import numpy as np

        saved = [layer.momentum for layer in self.layers]
        sums = [[np.zeros(layer.moving_mean.shape), np.zeros(layer.moving_variance.shape)] for layer in self.layers]
        n = 0
        try:
            for layer in self.layers:
                layer.momentum = 0.0
            for x, _ in batches:
                self.forward(x)
                n += 1
                for total, layer in zip(sums, self.layers):
                    total[0] += np.asarray(layer.moving_mean)
                    total[1] += np.asarray(layer.moving_variance)
            for (mean, var), layer in zip(sums, self.layers):
                layer.moving_mean.assign(mean / n)
                layer.moving_variance.assign(var / n)
        finally:
            for layer, momentum in zip(self.layers, saved):
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
    run = TrainerRun(BREAKDOWN_METHOD)
    import tensorflow as tf
    import keras

    spec, train = run.cell.spec, run.train
    keras.utils.set_random_seed(spec["cell"]["seed"])
    precision = requested(spec)
    switches = keras_policy(tf, keras, precision, gpu=run.cell.devices["kind"] == "gpu")
    fw = run.use(TFDistribute(tf, run.cell.devices))
    data = Cifar(tf, spec, fw.world)
    run.data_ready(len(data.x_train), test_images=len(data.x_test))
    with fw.strategy_obj.scope():
        model = build_model(keras, data.x_train.shape[1:], train["lr"])
    observed = keras_observed(keras, model, OBSERVED_LAYER, data.prep(data.x_train[:2]))
    run.model_ready(int(model.count_params()), replicas=fw.world, strategy=fw.strategy)
    bn = PreciseBN(tf, keras, model)
    score = lambda: evaluate(run, model, data, bn)  # noqa: E731
    with run.training(data.plan["steps_per_epoch"]):
        model.fit(data.ds, epochs=train["epochs"], steps_per_epoch=data.plan["steps_per_epoch"], verbose=2,
                  callbacks=epoch_callbacks(tf, keras, run, model, score))
    metrics = run.final(score)
    # after every figure: Keras' compiled step on the strategy's own distributed batches, untimed
    batches = iter(fw.strategy_obj.experimental_distribute_dataset(data.ds))
    run.profile(lambda: model.train_function(batches))
    run.finish(metrics=metrics, system={"keras": keras.__version__}, extra={"epoch": data.plan},
               precision=record(precision, observed, OBSERVED_LAYER, switches),
               model={"parameters": int(model.count_params()), "architecture": "ResNet50"})
    run.leave()


class Cifar:
    """The CIFAR-10 splits normalised by the train split's statistics; the train split as an
    epoch dataset (the whole split each epoch, equal shards over the replicas)."""

    def __init__(self, tf, spec: dict, replicas: int):
        data, train = spec["data"], spec["training"]
        self.x_train, self.y_train = cifar10.read_split(data["path"], "train", data.get("train_limit"))
        self.x_test, self.y_test = cifar10.read_split(data["path"], "test", data.get("test_limit"))
        self.mean, self.std = self.x_train.mean(axis=(0, 1, 2)), self.x_train.std(axis=(0, 1, 2)) + 1e-6
        if len(self.x_train) < train["global_batch"]:
            raise RuntimeError(f"train split has {len(self.x_train)} images, fewer than one global batch of "
                               f"{train['global_batch']}")
        self.plan = epoch_plan(len(self.x_train), train["global_batch"], train.get("max_steps_per_epoch"),
                               shards=replicas)
        self.ds = epoch_dataset(tf, self.prep(self.x_train), self.y_train, self.plan, spec["cell"]["seed"])

    def prep(self, x):
        return ((x.astype("float32") - self.mean) / self.std).astype("float32")


def build_model(keras, input_shape, lr: float):
    body = keras.applications.ResNet50(weights=None, input_shape=input_shape, classes=10, classifier_activation=None)
    probs_out = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(body.output)
    model = keras.Model(body.inputs, probs_out, name="resnet50")
    # no gradient clipping, as in the study's trainer: clipping at norm 1 held a short run at chance
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def evaluate(run: TrainerRun, model, data: Cifar, precise_bn: PreciseBN) -> dict:
    """Precise BN over a few training batches, then the whole test split once."""
    import numpy as np

    global_batch = run.train["global_batch"]
    bn_batches = precise_bn(data.ds.take(min(PRECISE_BN_BATCHES, data.plan["steps_per_epoch"])))
    run.events.log("precise_bn", bn_batches, images=bn_batches * global_batch)
    probs = model.predict(data.prep(data.x_test), batch_size=global_batch, verbose=0)
    return macro_precision_recall(data.y_test, np.argmax(probs, axis=1), num_classes=10)


def epoch_callbacks(tf, keras, run: TrainerRun, model, score) -> list:
    """Keras callbacks that report each epoch and step to the run: the step's data wait and
    compute come from time_each_fetch; what comes before an epoch's first batch is its fixed
    cost; evaluation after an epoch runs after the epoch closed (outside the timed region)."""
    last: dict = {}

    def on_step(data_wait_s, compute_s):
        if last.pop("epoch_begin", None) is not None:
            run.timer.epoch_fixed(last["t_fetch"] - run.epoch_started)
        last.update(data_wait_s=data_wait_s, compute_s=compute_s)

    time_each_fetch(tf, model, on_step, run.cell.test_hooks.get("data_delay_s"))

    class Timing(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            run.epoch_start(epoch)
            last.update(epoch_begin=True)

        def on_train_batch_begin(self, batch, logs=None):
            if "epoch_begin" in last:  # the epoch's first step starts here: what came before is fixed cost
                last["t_fetch"] = time.perf_counter()
                run.timer.start()

        def on_train_batch_end(self, batch, logs=None):
            run.step_done(data_wait_s=last["data_wait_s"], compute_s=last["compute_s"], sync_s=None)

        def on_epoch_end(self, epoch, logs=None):
            run.epoch_done(epoch, float(logs["loss"]), score)

    return [Timing()]


if __name__ == "__main__":
    main_guard(main)
