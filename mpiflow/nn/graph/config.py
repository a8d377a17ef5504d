"""``Graph.config``: the switches of OneFlow's ``GraphConfig``.

Those with a meaning on CPU act: gradient accumulation (micro-batches from one call's batch)
and ZeRO (stages 1-3: optimizer states, gradients, parameters sharded over the data-parallel
ranks). The others are accepted, so OneFlow programs run unchanged, and do nothing: mixed
precision (``enable_amp``: OneFlow's AMP is a GPU feature; on CPU mpiflow computes in the
tensors' own dtypes), cuDNN's algorithm search, and the kernel-fusion switches (a replayed plan
already runs without per-op dispatch).

Examples:
    >>> config = GraphConfig()
    >>> config.set_gradient_accumulation_steps(4)
    >>> config.enable_amp(True)          # a documented no-op on CPU
    >>> config.gradient_accumulation_steps
    4
"""

from __future__ import annotations

from typing import Any

__all__ = ["GraphConfig"]

_NO_OPS = (
    "enable_amp", "set_amp_dtype", "enable_cudnn_conv_heuristic_search_algo",
    "allow_fuse_model_update_ops", "allow_fuse_add_to_output", "allow_fuse_cast_scale",
    "set_outputs_buffer_size", "enable_straighten_algorithm", "enable_compress_memory",
    "enable_auto_parallel", "enable_auto_memory", "enable_multi_tensor_update",
    "enable_fused_model_update_cast", "enable_auto_parallel_ignore_user_sbp_config",
    "set_auto_parallel_computation_cost_ratio", "set_auto_parallel_wait_time",
    "enable_auto_parallel_trunk_algo", "enable_auto_parallel_sbp_collector",
    "enable_cudnn_conv_heuristic_search", "disable_straighten_algorithm",
    "enable_auto_mixed_precision", "enable_fuse_add_to_output", "enable_fuse_model_update_ops",
    "enable_fuse_cast_scale", "enable_xla_jit", "enable_tensorrt", "enable_openvino",
)


class GraphConfig:
    """The configuration of one :class:`~mpiflow.nn.Graph` (``graph.config``)."""

    def __init__(self) -> None:
        self.gradient_accumulation_steps = 1
        self.training = False  # a graph with an optimizer trains (add_optimizer sets it)
        self.zero_stage = 0
        self.zero_shard_min_size = 1024
        self.ignored: dict[str, tuple[Any, ...]] = {}  # the no-op switches, as set

    def set_gradient_accumulation_steps(self, value: int) -> None:
        """Split each call's batch (dim 0 of every tensor input) into ``value`` micro-batches;
        ``build()`` runs once per micro-batch, the gradients are averaged (each micro-batch's
        backward is seeded with ``1/value``), the optimizer steps once per call.

        Raises:
            ValueError: ``value`` is not a positive integer.
        """
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"gradient accumulation steps must be a positive int, got {value!r}")
        self.gradient_accumulation_steps = value

    def enable_zero(self, mode: bool = True, *, stage: int = 1, shard_min_size: int = 1024,
                    shard_restore_level: int = 1, min_shard_size: int | None = None) -> None:
        """Shard the optimizer's states (stage 1; 2: and the gradients; 3: and the parameters,
        gathered where they are read) over the ranks of each data-parallel (``B``) parameter's
        placement (:mod:`mpiflow.nn.graph.zero`).

        Args:
            mode: on or off.
            stage: 1, 2 or 3.
            shard_min_size: parameters with fewer elements stay whole (``min_shard_size``:
                OneFlow's older name).
            shard_restore_level: accepted; mpiflow makes one choice (see docs/graph.md).

        Raises:
            ValueError: ``stage`` is not 1, 2 or 3.
        """
        if stage not in (1, 2, 3):
            raise ValueError(f"ZeRO stage must be 1, 2 or 3, got {stage!r}")
        self.zero_stage = stage if mode else 0
        # OneFlow's older releases spell it min_shard_size.
        self.zero_shard_min_size = int(shard_min_size if min_shard_size is None
                                       else min_shard_size)
        del shard_restore_level  # OneFlow's memory/communication trade-off; one choice here

    def set_zero_redundancy_optimizer_mode(self, mode: str) -> None:
        """OneFlow's older form of :meth:`enable_zero` (``"distributed_split"``: stage 1)."""
        self.enable_zero(mode != "non_distributed", stage=1)

    def __getattr__(self, name: str) -> Any:
        if name in _NO_OPS:
            def ignore(*args: Any, **kwargs: Any) -> None:
                self.ignored[name] = args + tuple(kwargs.items())
            return ignore
        raise AttributeError(f"GraphConfig has no setting {name!r}")

    def __repr__(self) -> str:
        parts = [f"gradient_accumulation_steps={self.gradient_accumulation_steps}"]
        if self.zero_stage:
            parts.append(f"zero_stage={self.zero_stage}")
        parts += [f"{name}(ignored on CPU)" for name in self.ignored]
        return f"GraphConfig({', '.join(parts)})"
