"""The layers of :mod:`mpiflow.nn`, one module per family."""

from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .batchnorm import BatchNorm1d, BatchNorm2d
from .container import ModuleDict, ModuleList, Sequential
from .conv import AvgPool2d, Conv2d, MaxPool2d
from .dropout import Dropout, Dropout2d
from .embedding import Embedding
from .linear import Flatten, Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import IncompatibleKeys, Module, Parameter, RemovableHandle
from .normalization import LayerNorm
from .param_containers import ParameterDict, ParameterList

__all__ = [
    "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "Dropout2d", "MaxPool2d",
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten",
    "GELU", "Identity", "IncompatibleKeys", "L1Loss", "LayerNorm", "LeakyReLU", "Linear",
    "LogSoftmax", "MSELoss", "Module", "ModuleDict", "ModuleList", "NLLLoss", "Parameter",
    "ParameterDict", "ParameterList",
    "ReLU", "RemovableHandle", "Sequential", "SiLU", "Sigmoid", "Softmax", "Tanh",
]
