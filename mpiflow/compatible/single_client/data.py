"""``flow.data``: OneFlow's OFRecord readers are not supported; feed numpy arrays instead.

Every name here raises :class:`NotSupportedError` saying what to do: read the data with numpy
(or any library) and pass each batch to the job through ``flow.typing.Numpy.Placeholder``
arguments.

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.data.decode_ofrecord("train", [])
    Traceback (most recent call last):
    ...
    mpiflow.compatible.single_client.data.NotSupportedError: flow.data.decode_ofrecord: OFRecord ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["BlobConf", "NotSupportedError", "OFRecordRawDecoder", "RawCodec", "ImageCodec",
           "NormByChannelPreprocessor", "decode_ofrecord", "load_mnist", "ofrecord_image_decoder",
           "ofrecord_raw_decoder", "ofrecord_reader", "onerec_reader"]


class NotSupportedError(NotImplementedError):
    """A OneFlow 0.x data reader, which mpiflow does not have."""


def _refuse(name: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise NotSupportedError(
            f"flow.data.{name}: OFRecord (and OneFlow's other readers) are not supported by "
            "mpiflow.compatible.single_client; feed numpy arrays instead: read the data with "
            "numpy (or mpiflow.utils.data) and pass each batch to the job function through its "
            "flow.typing.Numpy.Placeholder arguments")

    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = "Not supported: raises :class:`NotSupportedError` (feed numpy)."
    return refused


decode_ofrecord = _refuse("decode_ofrecord")
BlobConf = _refuse("BlobConf")
RawCodec = _refuse("RawCodec")
ImageCodec = _refuse("ImageCodec")
NormByChannelPreprocessor = _refuse("NormByChannelPreprocessor")
OFRecordRawDecoder = _refuse("OFRecordRawDecoder")
ofrecord_reader = _refuse("ofrecord_reader")
ofrecord_raw_decoder = _refuse("ofrecord_raw_decoder")
ofrecord_image_decoder = _refuse("ofrecord_image_decoder")
onerec_reader = _refuse("onerec_reader")
load_mnist = _refuse("load_mnist")
