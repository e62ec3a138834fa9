"""The TensorFlow family (tf.distribute's MirroredStrategy: one process holds every replica):
what a TrainerRun asks of a framework. TensorFlow is passed in, never imported here."""
from __future__ import annotations


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

    def device_names(self) -> list[str]:
        return list(self.names)

    def system(self) -> dict:
        build = self.tf.sysconfig.get_build_info()
        return {"framework": "tensorflow", "framework_version": self.tf.__version__,
                "cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version")}

    def shut_down(self, cell) -> None:
        """Nothing to meet: the one process logged its run_stop with the result."""
