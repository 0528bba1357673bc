"""attnzoo: fast CPU kernels for every famous attention layer.

Arrays in: numpy arrays or any CPU object with ``__dlpack__`` (torch tensors), without copies where the
layout allows. Arrays out: the same kind as the main input (numpy in -> numpy out, torch in -> torch out).
Errors: ``ValueError`` names the offending argument, ``TypeError`` the argument with an unsupported dtype.
"""
# In a checkout, the compiled module is in the build tree (<build>/python/attnzoo/_core*.so) while these files
# stay in python/attnzoo: with both on sys.path, extend_path makes them one package. An installed package (pip)
# holds both in one directory and is unaffected.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from . import _core  # noqa: E402

__version__ = _core.__version__
from ._arrays import empty_like_input  # noqa: E402
from .softmax import attention, attention_reference, block_mask, BlockMask, lsh_attention, lsh_hash
from .decode import attention_decode
from .mla import mla_decode, mla_prefill
from .kv_cache import write_kv_paged, write_paged_rows
from . import linear
from .tokenizer import StreamDecoder, Tokenizer
from .model import ChatReply, Model, PoolExhaustedError, Sequence
from . import generate  # noqa: F401  (the module: attnzoo.generate.generate)
from . import perplexity  # noqa: F401  (the module: default_text, PerplexityResult; Model.perplexity runs it)
from .generate import Sampler, sample
from .chat import apply_chat_template
from .engine import LLM, Engine, SamplingParams
from . import quant  # noqa: F401
from .quant import quantize_checkpoint as quantize

supported_targets = _core.supported_targets
active_target = _core.active_target
set_target = _core.set_target
num_threads = _core.num_threads
set_num_threads = _core.set_num_threads
cpu_info = _core.cpu_info
set_float32_matmul_precision = _core.set_float32_matmul_precision
get_float32_matmul_precision = _core.get_float32_matmul_precision
set_batch_invariant = _core.set_batch_invariant
batch_invariant = _core.batch_invariant

__all__ = [
    "__version__",
    "attention", "attention_reference", "attention_decode", "block_mask", "BlockMask", "lsh_attention", "lsh_hash", "mla_decode", "mla_prefill", "write_kv_paged",
    "write_paged_rows", "linear",
    "Tokenizer", "StreamDecoder", "ChatReply", "Model", "PoolExhaustedError", "Sequence", "generate", "perplexity", "Sampler", "sample",
    "apply_chat_template", "LLM", "Engine", "SamplingParams", "quant", "quantize",
    "supported_targets", "active_target", "set_target", "num_threads", "set_num_threads", "cpu_info",
    "set_float32_matmul_precision", "get_float32_matmul_precision", "set_batch_invariant", "batch_invariant",
]
