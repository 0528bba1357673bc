"""`attnzoo bench serve`: a load generator against a running OpenAI-compatible server (`attnzoo serve`, or vLLM),
mirroring `vllm bench serve`: requests arrive as a Poisson process at --request-rate (or all at once), at most
--max-concurrency in flight, each streamed so that time to first token (TTFT), time per output token (TPOT),
inter-token latency (ITL) and end-to-end latency are measured per request; the server's prefix-cache hit rate
over the run comes from its /metrics. Standard library only.

A fleet: several --base-url take the requests in turn, or one --base-url is a router in front of the replicas and
--metrics-url lists the replicas; the prefix-cache hit rate is then the fleet's (hits over queries summed over the
replicas' /metrics), with each replica's beside it.

Datasets: "random" (prompts of random token ids, lengths drawn around --input-len with --range-ratio) and
"shared-prefix" (every prompt starts with one of --num-prefixes prefixes of --prefix-len tokens: system prompts, so
prefix caching shows; the prompts of the groups arrive in random order). There the TTFT of the requests whose
prefix the cache supplied is reported beside that of the requests it did not (each response's
usage.prompt_tokens_details.cached_tokens says which), and their ratio: what a prefix-cache hit saves.
Prompts are sent as token ids with ignore_eos, so every request generates exactly its --output-len tokens."""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


class Server:
    def __init__(self, base_url, timeout):
        url = urllib.parse.urlparse(base_url)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"--base-url: expected http://HOST:PORT, got {base_url!r}")
        self.host, self.port, self.timeout = url.hostname, url.port or 80, timeout

    def _connection(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def get(self, path):
        conn = self._connection()
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read().decode("utf-8", "replace")
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {resp.status}: {body[:200]}")
            return body
        finally:
            conn.close()

    def stream_completion(self, body):
        """POSTs a streamed completion; returns (chunk arrival times with tokens, usage, error or None)."""
        conn = self._connection()
        times, usage = [], None
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                return times, usage, f"HTTP {resp.status}: {resp.read()[:200]!r}"
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return times, usage, None
                chunk = json.loads(data)
                if "error" in chunk:
                    return times, usage, str(chunk["error"].get("message"))
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if chunk.get("choices"):
                    times.append(time.perf_counter())
            return times, usage, "stream ended without [DONE]"
        except (OSError, http.client.HTTPException, ValueError) as e:
            return times, usage, f"{type(e).__name__}: {e}"
        finally:
            conn.close()


def prefix_cache_counters(metrics_text):
    """(queries, hits) summed over label sets; None when the server does not export them."""
    found = {}
    for line in metrics_text.splitlines():
        for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
            if line.startswith(name + "{") or line.startswith(name + " "):
                found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    if len(found) < 2:
        return None
    return found["vllm:prefix_cache_queries_total"], found["vllm:prefix_cache_hits_total"]


def fleet_counters(servers):
    """{url: (queries, hits)} of each replica that answers /metrics now (one gone mid-run is left out)."""
    out = {}
    for url, server in servers.items():
        try:
            counters = prefix_cache_counters(server.get("/metrics"))
        except (OSError, RuntimeError, http.client.HTTPException):
            continue
        if counters:
            out[url] = counters
    return out


def fleet_hit_rates(before, after):
    """(fleet hit rate or None, [{url, queried_tokens, hit_tokens, hit_rate}]) over the replicas read both times."""
    replicas, queries, hits = [], 0.0, 0.0
    for url in before:
        if url not in after:
            replicas.append({"url": url, "queried_tokens": None, "hit_tokens": None, "hit_rate": None})
            continue
        q, h = after[url][0] - before[url][0], after[url][1] - before[url][1]
        queries, hits = queries + q, hits + h
        replicas.append({"url": url, "queried_tokens": int(q), "hit_tokens": int(h),
                         "hit_rate": h / q if q > 0 else None})
    return (hits / queries if queries > 0 else None), replicas


def make_prompts(args, vocab_size, rng):
    def length(mean):
        lo = max(1, int(mean * (1 - args.range_ratio)))
        hi = max(lo, int(mean * (1 + args.range_ratio)))
        return rng.randint(lo, hi)

    def tokens(n):
        return [rng.randrange(vocab_size) for _ in range(n)]

    if args.dataset != "shared-prefix":
        return [(tokens(length(args.input_len)), length(args.output_len)) for _ in range(args.num_prompts)]
    prefixes = [tokens(args.prefix_len) for _ in range(args.num_prefixes)]
    prompts = [(prefixes[i % args.num_prefixes] + tokens(length(args.input_len)), length(args.output_len))
               for i in range(args.num_prompts)]
    rng.shuffle(prompts)
    return prompts


def percentiles(values, scale=1000.0):
    if not values:
        return {"mean": 0.0, "median": 0.0, "p99": 0.0}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"mean": statistics.fmean(values) * scale, "median": statistics.median(values) * scale, "p99": p99 * scale}


def run(args):
    targets = [Server(url, args.timeout) for url in args.base_url]
    metrics = {url: Server(url, args.timeout) for url in (args.metrics_url or args.base_url)}
    models = json.loads(targets[0].get("/v1/models"))["data"]
    model = args.model or models[0]["id"]
    vocab_size = args.vocab_size or models[0].get("vocab_size")
    if not vocab_size:
        raise ValueError("--vocab-size: the server does not report one; give it")
    rng = random.Random(args.seed)
    prompts = make_prompts(args, vocab_size, rng)
    before = fleet_counters(metrics)

    results = [None] * len(prompts)
    limit = threading.Semaphore(args.max_concurrency) if args.max_concurrency else None

    def one(i, prompt, out_len):
        try:
            body = {"model": model, "prompt": prompt, "max_tokens": out_len, "temperature": 0.0, "ignore_eos": True,
                    "stream": True, "stream_options": {"include_usage": True}}
            start = time.perf_counter()
            times, usage, error = targets[i % len(targets)].stream_completion(body)
            end = time.perf_counter()
            results[i] = {"start": start, "end": end, "times": times, "usage": usage, "error": error,
                          "prompt_len": len(prompt)}
        finally:
            if limit:
                limit.release()

    threads = []
    bench_start = time.perf_counter()
    next_arrival = bench_start
    for i, (prompt, out_len) in enumerate(prompts):
        if args.request_rate != float("inf"):
            next_arrival += rng.expovariate(args.request_rate)
            delay = next_arrival - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        if limit:
            limit.acquire()
        t = threading.Thread(target=one, args=(i, prompt, out_len), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    duration = time.perf_counter() - bench_start
    after = fleet_counters(metrics)
    return summarize(args, model, results, duration, before, after)


def summarize(args, model, results, duration, before, after):
    """`before` / `after`: {replica url: (prefix-cache queries, hits)} from fleet_counters."""
    ok = [r for r in results if r and r["error"] is None]
    failed = [r for r in results if not r or r["error"] is not None]
    ttft, tpot, itl, e2e = [], [], [], []
    input_tokens = output_tokens = 0
    for r in ok:
        n_out = r["usage"]["completion_tokens"] if r["usage"] else len(r["times"])
        input_tokens += r["prompt_len"]
        output_tokens += n_out
        if r["times"]:
            ttft.append(r["times"][0] - r["start"])
            itl.extend(b - a for a, b in zip(r["times"], r["times"][1:]))
            if n_out > 1:
                tpot.append((r["end"] - r["times"][0]) / (n_out - 1))
        e2e.append(r["end"] - r["start"])
    doc = {
        "model": model, "base_url": args.base_url[0] if len(args.base_url) == 1 else args.base_url,
        "dataset": args.dataset, "num_prompts": args.num_prompts,
        "request_rate": None if args.request_rate == float("inf") else args.request_rate,
        "max_concurrency": args.max_concurrency, "duration_s": duration,
        "completed": len(ok), "failed": len(failed),
        "errors": sorted({r["error"] for r in failed if r})[:5],
        "total_input_tokens": input_tokens, "total_output_tokens": output_tokens,
        "request_throughput": len(ok) / duration if duration > 0 else 0.0,
        "output_throughput": output_tokens / duration if duration > 0 else 0.0,
        "total_token_throughput": (input_tokens + output_tokens) / duration if duration > 0 else 0.0,
        "ttft_ms": percentiles(ttft), "tpot_ms": percentiles(tpot), "itl_ms": percentiles(itl),
        "e2el_ms": percentiles(e2e),
    }
    doc["prefix_cache_hit_rate"], doc["replicas"] = fleet_hit_rates(before, after)
    if args.dataset == "shared-prefix" and args.prefix_len > 0:
        doc["prefix_ttft"] = prefix_ttft(ok, args.prefix_len)
    return doc


def cached_tokens(result):
    """Prompt tokens the server's prefix cache supplied to this request (None: its usage does not say)."""
    details = (result["usage"] or {}).get("prompt_tokens_details") or {}
    return details.get("cached_tokens")


def prefix_ttft(ok, prefix_len):
    """TTFT of the requests that found their shared prefix cached (at least half of it: a hit gets the prefix's
    whole blocks, all of it but a last partial block) beside those that found none of it (the first of each group, and any arriving before the
    first's prefill had cached a block). One admitted while its group's first was half-way through a chunked
    prefill finds part of the prefix: counted as partial, in neither, so the ratio compares whole hits with
    cold prompts. The speedup is the misses' median TTFT over the hits'."""
    hits, misses, partial, unknown = [], [], 0, 0
    for r in ok:
        cached = cached_tokens(r)
        if cached is None or not r["times"]:
            unknown += 1
        elif cached == 0:
            misses.append(r["times"][0] - r["start"])
        elif 2 * cached >= prefix_len:
            hits.append(r["times"][0] - r["start"])
        else:
            partial += 1
    hit_ms, miss_ms = percentiles(hits), percentiles(misses)
    return {"prefix_len": prefix_len, "hit_requests": len(hits), "miss_requests": len(misses),
            "partial_requests": partial, "unknown_requests": unknown, "hit_ttft_ms": hit_ms, "miss_ttft_ms": miss_ms,
            "ttft_speedup": miss_ms["median"] / hit_ms["median"] if hits and misses and hit_ms["median"] > 0
            else None}


def format_report(doc):
    rows = [("Successful requests", doc["completed"]), ("Failed requests", doc["failed"]),
            ("Benchmark duration (s)", f"{doc['duration_s']:.2f}"),
            ("Total input tokens", doc["total_input_tokens"]), ("Total generated tokens", doc["total_output_tokens"]),
            ("Request throughput (req/s)", f"{doc['request_throughput']:.2f}"),
            ("Output token throughput (tok/s)", f"{doc['output_throughput']:.2f}"),
            ("Total token throughput (tok/s)", f"{doc['total_token_throughput']:.2f}")]
    for key, title in (("ttft_ms", "Time to First Token"), ("tpot_ms", "Time per Output Token (excl. 1st token)"),
                       ("itl_ms", "Inter-token Latency"), ("e2el_ms", "End-to-end Latency")):
        rows.append((f"---{title}---", None))
        short = key.split("_")[0].upper()
        for stat in ("mean", "median", "p99"):
            label = "Median" if stat == "median" else stat.capitalize() if stat == "mean" else "P99"
            rows.append((f"{label} {short} (ms)", f"{doc[key][stat]:.2f}"))
    def percent(rate):
        return "n/a" if rate is None else f"{100 * rate:.1f}%"

    rows.append(("Prefix cache hit rate" + (" (fleet)" if len(doc["replicas"]) > 1 else ""),
                 percent(doc["prefix_cache_hit_rate"])))
    if len(doc["replicas"]) > 1:
        for r in doc["replicas"]:
            rows.append((f"  {r['url']}", "gone" if r["queried_tokens"] is None else percent(r["hit_rate"])))
    if "prefix_ttft" in doc:
        p = doc["prefix_ttft"]
        rows += [(f"---TTFT by prefix-cache hit ({p['prefix_len']}-token prefix)---", None),
                 ("Hit / miss / partial requests", f"{p['hit_requests']} / {p['miss_requests']} / "
                                                   f"{p['partial_requests']}"),
                 ("Median TTFT, hits (ms)", f"{p['hit_ttft_ms']['median']:.2f}"),
                 ("Median TTFT, misses (ms)", f"{p['miss_ttft_ms']['median']:.2f}"),
                 ("TTFT speedup of a hit", "n/a" if p["ttft_speedup"] is None else f"{p['ttft_speedup']:.2f}x")]
    lines = ["{s:{c}^50}".format(s=" Serving Benchmark Result ", c="=")]
    for name, value in rows:
        lines.append("{s:{c}^50}".format(s=name, c="-") if value is None else f"{name:<40}{value:<10}")
    for e in doc["errors"]:
        lines.append(f"error: {e}")
    lines.append("=" * 50)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="attnzoo bench serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["serve"], help="what to benchmark")
    parser.add_argument("--base-url", nargs="+", default=["http://127.0.0.1:8000"],
                        help="the server, or several that take the requests in turn (default %(default)s)")
    parser.add_argument("--metrics-url", nargs="+",
                        help="replicas whose /metrics give the prefix-cache hit rate (default: the --base-url list; "
                             "give the replicas when --base-url is a router)")
    parser.add_argument("--model", help="model id to request (default: the server's first)")
    parser.add_argument("--dataset", default="random", choices=["random", "shared-prefix"])
    parser.add_argument("--num-prompts", type=int, default=100)
    parser.add_argument("--input-len", type=int, default=256, help="prompt tokens (after the shared prefix)")
    parser.add_argument("--output-len", type=int, default=64, help="generated tokens per request")
    parser.add_argument("--prefix-len", type=int, default=1024, help="shared-prefix: tokens every prompt starts with")
    parser.add_argument("--num-prefixes", type=int, default=1, help="shared-prefix: distinct prefixes (groups)")
    parser.add_argument("--range-ratio", type=float, default=0.0, help="lengths drawn in [len*(1-r), len*(1+r)]")
    parser.add_argument("--request-rate", type=float, default=float("inf"),
                        help="requests per second, Poisson arrivals (default inf: all at once)")
    parser.add_argument("--max-concurrency", type=int, default=0, help="requests in flight at most (0: no limit)")
    parser.add_argument("--vocab-size", type=int, help="token ids are drawn below this (default: the server's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    args = parser.parse_args(argv)
    for name in ("num_prompts", "input_len", "output_len", "num_prefixes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: must be at least 1")
    if args.prefix_len < 0 or args.max_concurrency < 0 or not 0 <= args.range_ratio < 1 or args.request_rate <= 0:
        parser.error("--prefix-len, --max-concurrency >= 0, --range-ratio in [0, 1), --request-rate > 0")
    try:
        doc = run(args)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"attnzoo bench serve: {e}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if args.json else format_report(doc))
    return 0 if doc["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
