"""The TensorFlow family (tf.distribute's MirroredStrategy: one process holds every replica):
what a TrainerRun asks of a framework, and Keras' switch for the precision presets (and the
observed dtype). TensorFlow is passed in, never imported here."""
from __future__ import annotations

from .precision import PrecisionError


def make_strategy(tf, devices: dict):
    """The MirroredStrategy over the cell's devices (a CPU host's slots as logical CPU devices)
    and the devices' names."""
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


class TFDistribute:
    """The one process of a MirroredStrategy run: rank 0, its replicas the world."""
    rank = 0

    def __init__(self, tf, devices: dict):
        self.tf = tf
        self.strategy_obj, self.names = make_strategy(tf, devices)
        self.world = self.strategy_obj.num_replicas_in_sync
        self.strategy = type(self.strategy_obj).__name__

    def gather(self, mine: list) -> list:
        return list(mine)  # one process: its timer saw every replica's step

    def profiler(self):
        """TensorFlow's profiler for the profiling window (scalebench_kit.profiling)."""
        from .profiling import TFProfiler

        return TFProfiler(self.tf)

    def device_names(self) -> list[str]:
        return list(self.names)

    def system(self) -> dict:
        build = self.tf.sysconfig.get_build_info()
        return {"framework": "tensorflow", "framework_version": self.tf.__version__,
                "cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version")}

    def shut_down(self, cell) -> None:
        """Nothing to meet: the one process logged its run_stop with the result."""


def keras_policy(tf, keras, precision: str, gpu: bool) -> dict:
    """Keras 3: the global dtype policy (`mixed_bfloat16` / `mixed_float16`; Keras wraps the
    optimiser in a LossScaleOptimizer for float16 at compile) and TensorFlow's TF32 switch."""
    if precision in ("fp16", "tf32") and not gpu:
        raise PrecisionError(f"{precision} needs a CUDA device; CPU runs fp32 or bf16")
    policy = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}.get(precision, "float32")
    keras.mixed_precision.set_global_policy(policy)
    tf.config.experimental.enable_tensor_float_32_execution(precision != "fp32")
    return {"dtype_policy": policy, "tensor_float_32": precision != "fp32", "loss_scale": precision == "fp16"}


def keras_observed(keras, model, layer_name: str, batch) -> str:
    """The dtype of `layer_name`'s output when the model runs `batch` (a forward pass, not the policy)."""
    probe = keras.Model(model.inputs, model.get_layer(layer_name).output)
    dtype = probe(batch, training=False).dtype
    return str(getattr(dtype, "name", dtype))
