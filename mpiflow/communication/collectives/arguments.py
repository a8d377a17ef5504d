"""The arguments of the torch-signature collectives, as the communicators take them.

:mod:`.torch_api` checks every argument on the calling rank before anything is sent. This
module turns each argument (a numpy array, an mpiflow tensor, a CuPy array or a
``torch.Tensor``) into the array behind it and the step that finishes it once the operation
has completed (a staged copy written back, a float32 copy rounded back to bfloat16), and holds
the checks of lists, shapes, dtypes and split sizes that several collectives share. The
errors name the argument: ``ValueError`` for a wrong length, shape or size, ``TypeError`` for
a wrong type or dtype.

Example:
    >>> from mpiflow.communication.collectives.arguments import buffer_arg
    >>> array, post = buffer_arg(numpy.ones(3), "tensor")
    >>> array.tolist(), post is None
    ([1.0, 1.0, 1.0], True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ...core.array_module import array_module
from ...core.buffers import as_buffer
from ...core.reduce_op import ReduceOp, check_reduce_dtype
from ...core.torch_arrays import Post, chain, is_torch_tensor, numpy_dtype, stage
from ..mpi.interface import Communicator

__all__ = ["buffer_arg", "check_concat_shape", "check_like", "check_torch_dtypes", "copy_out",
           "list_args", "reduce_arg", "single_args", "split_counts", "stack"]


def buffer_arg(obj: Any, what: str, write: bool = False) -> tuple[Any, Post | None]:
    """The array behind an argument that is moved, not reduced, and the step that finishes it.

    Args:
        obj: a numpy array, a registered array-like or a torch tensor.
        what: the argument's name, for errors.
        write: the operation writes into ``obj`` (a CUDA tensor's staged copy is copied back).

    Returns:
        ``(array, post)``: ``post`` is None or must run after the operation has completed.
    """
    if type(obj) is numpy.ndarray:
        return obj, None
    if is_torch_tensor(obj):
        return stage(obj, what, write=write)
    return as_buffer(obj, what), None


def reduce_arg(obj: Any, what: str, op: ReduceOp, write: bool) -> tuple[Any, Post | None]:
    """As :func:`buffer_arg` for an operand of a reduction: a tensor of a dtype numpy lacks
    (bfloat16) becomes a float32 (complex64) copy, never its bits, rounded back by ``post``."""
    if type(obj) is numpy.ndarray:
        return obj, None
    if not is_torch_tensor(obj):
        return as_buffer(obj, what), None
    array, post = stage(obj, what, reduce=True, write=write)
    if numpy_dtype(obj.dtype) is None:
        # The communicator checks ``op`` against the wider dtype; name the tensor's own.
        try:
            check_reduce_dtype(op, array.dtype)
        except TypeError as exc:
            raise TypeError(f"{what} is a {obj.dtype} tensor (reduced as {array.dtype}): "
                            f"{exc}") from None
    return array, post


def list_args(objs: Any, what: str, write: bool = False, reduce: ReduceOp | None = None
               ) -> tuple[list[Any], Post | None]:
    """The arrays behind a list of arguments (see :func:`buffer_arg`), and the steps finishing them.

    Args:
        objs: a list or tuple of arrays or tensors.
        what: the list's name, for errors.
        write: the operation writes into the entries.
        reduce: the op, when the entries are reduced.
    """
    if not isinstance(objs, (list, tuple)):
        raise TypeError(f"{what} must be a list of arrays or tensors, got {type(objs).__name__}")
    arrays, posts = [], []
    for i, obj in enumerate(objs):
        array, post = (buffer_arg(obj, f"{what}[{i}]", write) if reduce is None
                       else reduce_arg(obj, f"{what}[{i}]", reduce, write))
        arrays.append(array)
        posts.append(post)
    return arrays, chain(*posts)


def check_torch_dtypes(objs: Sequence[Any], what: str) -> None:
    """Raise ``TypeError`` when the torch tensors among ``objs`` differ in dtype.

    bfloat16 and float16 tensors, say, become arrays of different dtypes, but bfloat16 and
    int16 ones both become int16 arrays: only torch's own dtypes tell those apart.
    """
    dtypes = {o.dtype for o in objs if is_torch_tensor(o)}
    if len(dtypes) > 1:
        raise TypeError(f"{what} need one dtype, got tensors of {sorted(map(str, dtypes))}")


def check_like(bufs: Sequence[Any], size: int, like: Any, what: str) -> None:
    """Check that ``bufs`` has ``size`` entries, each of ``like``'s shape and dtype.

    Example:
        >>> check_like([numpy.ones(2)], 1, numpy.zeros(2), "tensor_list")
    """
    if len(bufs) != size:
        raise ValueError(f"{what} must have one entry per rank of the group ({size}), "
                         f"got {len(bufs)}")
    for i, b in enumerate(bufs):
        if b.shape != like.shape:
            raise ValueError(f"{what}[{i}] has shape {tuple(b.shape)}, expected "
                             f"{tuple(like.shape)}")
        if b.dtype != like.dtype:
            raise TypeError(f"{what}[{i}] has dtype {b.dtype}, expected {like.dtype}")


def copy_out(outs: Sequence[Any], stacked: Any) -> Callable[[], None]:
    """The step that copies row ``i`` of ``stacked`` into ``outs[i]``."""

    def post() -> None:
        for out, part in zip(outs, stacked):
            out[...] = part

    return post


def stack(bufs: Sequence[Any], like: Any) -> Any:
    """``bufs`` stacked into a new array of ``like``'s array module and dtype.

    Example:
        >>> stack([numpy.ones(2), numpy.zeros(2)], numpy.ones(2)).shape
        (2, 2)
    """
    stacked = array_module(like).empty((len(bufs), *like.shape), dtype=like.dtype)
    for i, b in enumerate(bufs):
        stacked[i] = b
    return stacked


def check_concat_shape(big: Any, small: Any, size: int, what: str) -> None:
    """Check that ``big`` holds ``size`` of ``small``, concatenated along dim 0 or stacked."""
    bshape, sshape = big.shape, small.shape
    # Fast path for the common, valid concatenated layout: as many dims, dim 0
    # ``size`` times as long, the other dims equal. Anything else takes the full check below.
    if (sshape and len(bshape) == len(sshape) and bshape[0] == size * sshape[0]
            and bshape[1:] == sshape[1:] and big.dtype == small.dtype):
        return
    stacked = (size, *small.shape)
    concat = (size * small.shape[0], *small.shape[1:]) if small.ndim else stacked
    if tuple(big.shape) not in (stacked, concat):
        raise ValueError(f"{what} has shape {tuple(big.shape)}; with {size} ranks it must be "
                         f"{concat} (concatenated) or {stacked} (stacked)")
    if big.dtype != small.dtype:
        raise TypeError(f"{what} has dtype {big.dtype}, expected {small.dtype}")


def split_counts(splits: Sequence[int] | None, rows: int, row: int, size: int,
                  what: str) -> list[int]:
    """Element counts per rank of ``rows`` rows of ``row`` elements, split by ``splits``
    (None: evenly).

    Example:
        >>> split_counts([1, 2], 3, 4, 2, "input_split_sizes")
        [4, 8]
    """
    if splits is None:
        if rows % size:
            raise ValueError(f"{what}: dim 0 ({rows}) is not divisible by the group size "
                             f"({size}); pass split sizes")
        return [rows // size * row] * size
    splits = [int(s) for s in splits]
    if len(splits) != size or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(f"{what} must be {size} non-negative sizes summing to dim 0 ({rows}), "
                         f"got {splits}")
    return [s * row for s in splits]


def single_args(comm: Communicator, output: Any, input: Any,
                 output_split_sizes: Sequence[int] | None,
                 input_split_sizes: Sequence[int] | None
                 ) -> tuple[Any, Any, tuple[list[int], list[int]] | None, Post | None]:
    """all_to_all_single's checked arrays, element counts (None: an even split) and post."""
    out, out_post = buffer_arg(output, "output", write=True)
    inp, in_post = buffer_arg(input, "input")
    if out.ndim == 0 or inp.ndim == 0:
        raise ValueError("all_to_all_single needs arrays with at least one dimension")
    if out.dtype != inp.dtype:
        raise TypeError(f"output dtype {out.dtype} differs from input dtype {inp.dtype}")
    check_torch_dtypes([output, input], "output and input")
    post = chain(in_post, out_post)
    if output_split_sizes is None and input_split_sizes is None:
        if out.size != inp.size:
            raise ValueError(f"output has {out.size} elements, input {inp.size}; without split "
                             "sizes they must match")
        split_counts(None, inp.shape[0], 1, comm.size, "input")  # checks dim 0 divides evenly
        return out, inp, None, post
    in_row = math.prod(inp.shape[1:])
    out_row = math.prod(out.shape[1:])
    scounts = split_counts(input_split_sizes, inp.shape[0], in_row, comm.size,
                            "input_split_sizes")
    rcounts = split_counts(output_split_sizes, out.shape[0], out_row, comm.size,
                            "output_split_sizes")
    return out, inp, (scounts, rcounts), post
