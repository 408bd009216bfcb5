"""Example models in plain torch (no downloads) for ``from_torch`` and ``workbench import-model``.

Each factory returns a module with an ``example_inputs()`` method, so
``workbench import-model workbench.models:gpt_decoder --out g.json`` needs no
``--input-shape``. Importing this package imports torch.
"""

from __future__ import annotations

from .cnn import SmallCNN, small_cnn
from .gpt import GPTDecoder, gpt_decoder
from .llama import LlamaBlock, llama_block
from .mlp import MLP, mlp

__all__ = ["GPTDecoder", "gpt_decoder", "LlamaBlock", "llama_block", "MLP", "mlp", "SmallCNN", "small_cnn"]
