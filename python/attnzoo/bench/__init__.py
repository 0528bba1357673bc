"""Benchmarks: `python -m attnzoo.bench kernels` (the kernel table, what `attnzoo bench kernels` runs),
`python -m attnzoo.bench.model` (a whole checkpoint: prefill, decode, memory) and `python -m attnzoo.bench.serve`
(a load generator against a running `attnzoo serve`).

harness: cases, goals, peaks and the timing policy every table shares. kernels: the kernel table and its
printing; its rows come from softmax, single (single-form kernels: MLA, scans, convolution, projection GEMM),
linear (families with chunked and recurrent forms) and ssm (Mamba-2 at model shapes, strong decays).
"""
