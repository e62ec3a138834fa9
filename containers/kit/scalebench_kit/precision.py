"""A cell's numeric precision: each framework's own switch for the four presets, and the record of
what ran (requested, and the dtype an inner layer's output actually had). Frameworks are imported
by the caller and passed in: the kit itself stays standard-library only."""
from __future__ import annotations

from contextlib import nullcontext

from .names import COMPUTE_DTYPE, PRECISIONS


class PrecisionError(ValueError):
    """A precision this device or framework cannot run, with the reason."""


def requested(spec: dict) -> str:
    p = spec["training"].get("precision", "fp32")
    if p not in PRECISIONS:
        raise PrecisionError(f"cell.json training.precision {p!r}: expected one of {list(PRECISIONS)}")
    return p


def record(precision: str, observed: str | None, layer: str, switches: dict) -> dict:
    """The result contract's `precision`: what was asked, what ran, and the settings used."""
    return {"requested": precision, "expected_dtype": COMPUTE_DTYPE[precision], "observed_dtype": observed,
            "observed_layer": layer, "switches": switches}


def not_observed(precision: str, why: str) -> dict:
    """The record of a trainer with no model layer to observe (it says so; nothing is claimed)."""
    return record(precision, None, why, {})


class TorchPrecision:
    """PyTorch: `autocast` to bf16/fp16 (a GradScaler for fp16), the TF32 flags (off for fp32, on for
    tf32 and the mixed presets), and on CUDA `cudnn.benchmark` and channels_last for conv nets."""

    def __init__(self, torch, precision: str, device, conv_net: bool = True):
        self.torch, self.precision, self.device = torch, precision, device
        cuda = device.type == "cuda"
        if precision == "fp16" and not cuda:
            raise PrecisionError("fp16 mixed precision needs a CUDA device (GradScaler); CPU runs fp32 or bf16")
        if precision == "tf32" and not cuda:
            raise PrecisionError("tf32 is a tensor-core mode of CUDA devices; CPU runs fp32 or bf16")
        tf32 = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = cuda
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.memory_format = torch.channels_last if cuda and conv_net else torch.contiguous_format
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        self.switches = {"autocast": str(self.dtype).replace("torch.", "") if self.dtype else None,
                         "grad_scaler": self.scaler is not None, "allow_tf32": tf32,
                         "cudnn_benchmark": cuda, "channels_last": self.memory_format is torch.channels_last}

    def autocast(self):
        if self.dtype is None:
            return nullcontext()
        return self.torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def backward_step(self, loss, optimiser, between=None) -> None:
        """backward, (`between()`: e.g. a timing mark after backward), optimiser step; scaled for fp16."""
        if self.scaler is None:
            loss.backward()
            if between:
                between()
            optimiser.step()
            return
        self.scaler.scale(loss).backward()
        if between:
            between()
        self.scaler.step(optimiser)
        self.scaler.update()

    def observe(self, module, name: str) -> "ObservedDtype":
        """Hook `module` (an inner layer): the dtype its output had on the last forward pass."""
        return ObservedDtype(module, name)

    def record(self, observed: "ObservedDtype") -> dict:
        return record(self.precision, observed.dtype, observed.name, self.switches)


class ObservedDtype:
    def __init__(self, module, name: str):
        self.name, self.dtype = name, "not observed"
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output) -> None:
        self.dtype = str(output.dtype).replace("torch.", "")
        self._handle.remove()  # the first training forward pass tells; no cost afterwards


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
