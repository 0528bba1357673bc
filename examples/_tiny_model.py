"""A tiny random Llama checkpoint for running the examples without a download (transformers writes it)."""
import os
import tempfile


def model_dir(argv):
    """argv[1] when given (a Hugging Face model directory), else a fresh tiny random checkpoint."""
    if len(argv) > 1:
        return argv[1]
    import torch
    import transformers
    d = tempfile.mkdtemp(prefix="attnzoo_example_")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    transformers.LlamaForCausalLM(cfg).save_pretrained(d)
    print(f"(no model given: a tiny random Llama in {d}; pass a model directory to use a real one)")
    return d


def has_tokenizer(directory):
    return os.path.exists(os.path.join(directory, "tokenizer.json"))
