"""Many `attnzoo serve` replicas behind vllm-router (PyPI), and the deployment files that run them (Dockerfile,
deploy/kubernetes/), checked against what running replicas really expose.

A fleet of 3 replicas of a tiny random Llama (written here with numpy; a tokenizer from scripts/make_bench_model.py)
on free loopback ports, and vllm-router started in front of them per test. References: HF `tokenizers` for the
token ids a replica gives the router; the replicas' own /metrics for the prefix-cache hit rates; the binary's
ELF NEEDED entries and dpkg for the runtime image's packages. Every process is killed in a finally."""
import glob
import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("safetensors")
tokenizers = pytest.importorskip("tokenizers")
jinja2 = pytest.importorskip("jinja2")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
needs_cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")
ROUTER = os.path.join(os.path.dirname(sys.executable), "vllm-router")
needs_router = pytest.mark.skipif(not os.access(ROUTER, os.X_OK), reason="vllm-router not installed (requirements.txt)")
VOCAB, PREFIX, GROUPS = 512, 128, 30
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")
# 104 KV blocks of 16 tokens per replica: the 30 system prompts of 8 blocks do not fit in one replica's pool, the 10
# a cache-aware router sends to each one do (with room for the requests in flight).
POOL_BYTES = 104 * 16 * 2 * 2 * 2 * 16 * 4  # blocks * tokens * layers * (K, V) * kv heads * head dim * f32


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    """(status, body) of a GET; (None, error) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _write_tiny_llama(directory):
    script = os.path.join(ROOT, "scripts", "make_bench_model.py")
    spec = importlib.util.spec_from_file_location("make_bench_model", script)
    make_bench_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_bench_model)
    from safetensors.numpy import save_file
    hidden, inter, layers, heads, kv_heads, head_dim = 64, 128, 2, 4, 2, 16
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
              "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
              "max_position_embeddings": 1024, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "bos_token_id": VOCAB - 1, "eos_token_id": VOCAB - 1}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    t = {"model.embed_tokens.weight": w(VOCAB, hidden), "model.norm.weight": np.ones(hidden, np.float32),
         "lm_head.weight": w(VOCAB, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t.update({p + "self_attn.q_proj.weight": w(heads * head_dim, hidden),
                  p + "self_attn.k_proj.weight": w(kv_heads * head_dim, hidden),
                  p + "self_attn.v_proj.weight": w(kv_heads * head_dim, hidden),
                  p + "self_attn.o_proj.weight": w(hidden, heads * head_dim),
                  p + "mlp.gate_proj.weight": w(inter, hidden), p + "mlp.up_proj.weight": w(inter, hidden),
                  p + "mlp.down_proj.weight": w(hidden, inter),
                  p + "input_layernorm.weight": np.ones(hidden, np.float32),
                  p + "post_attention_layernorm.weight": np.ones(hidden, np.float32)})
    save_file(t, os.path.join(directory, "model.safetensors"))
    make_bench_model.write_tokenizer(directory, VOCAB)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHAT_TEMPLATE, "eos_token": "<|endoftext|>"}, f)


def _start(procs, argv):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(proc)
    return proc


def _wait_for(url, ok, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        status, body = _get(url, timeout=1)
        if ok(status, body):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not ready after {seconds} s ({url})")


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """URLs of 3 replicas, each with its process; killed at the end whatever the tests did to them."""
    model = str(tmp_path_factory.mktemp("tiny_llama"))
    _write_tiny_llama(model)
    procs, urls = [], []
    try:
        for _ in range(3):
            proc = subprocess.Popen([CLI, "serve", "-m", model, "--port", "0", "--served-model-name", "tiny",
                                     "--kv-cache-memory", str(POOL_BYTES), "--max-num-seqs", "16"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(proc)
            line = proc.stdout.readline()  # "attnzoo serve: listening on http://127.0.0.1:PORT", before loading
            assert "listening on http://" in line, line
            urls.append(line.split("listening on ")[1].strip())
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # the rest, so the pipe never fills
        for url in urls:
            _wait_for(url + "/health", lambda s, _: s == 200, 30, "attnzoo serve")
        yield {"urls": urls, "procs": procs, "model": model}
    finally:
        _stop(procs)


class Router:
    """vllm-router over `urls`, health-checked every second (2 failures: out of the rotation)."""

    def __init__(self, urls, policy):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs = []
        _start(self.procs, [ROUTER, "--worker-urls", *urls, "--host", "127.0.0.1", "--port", str(self.port),
                            "--policy", policy, "--prometheus-port", str(_free_port()),
                            "--health-check-interval-secs", "1", "--health-failure-threshold", "2",
                            "--request-timeout-secs", "20", "--log-level", "warning"])
        try:
            _wait_for(self.url + "/readiness", lambda s, b: s == 200 and json.loads(b)["healthy_workers"] == len(urls),
                      30, f"vllm-router ({policy})")
        except BaseException:
            self.close()
            raise

    def healthy_workers(self):
        status, body = _get(self.url + "/readiness", timeout=2)
        return json.loads(body)["healthy_workers"] if status in (200, 503) else None

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        try:
            for p in self.procs:
                p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        finally:
            _stop(self.procs)


def _metric_names(metrics_text):
    """Every sample family a /metrics text declares (# TYPE lines)."""
    return {line.split()[2] for line in metrics_text.splitlines() if line.startswith("# TYPE ")}


# --- what a replica answers the router ---------------------------------------------------------------------------

@needs_cli
def test_replica_answers_what_the_router_reads(fleet):
    url = fleet["urls"][0]
    hf = tokenizers.Tokenizer.from_file(os.path.join(fleet["model"], "tokenizer.json"))
    text = "the quick brown fox, again"
    status, doc = _post(url + "/tokenize", {"model": "tiny", "prompt": text})
    assert status == 200 and doc["tokens"] == hf.encode(text).ids and doc["count"] == len(doc["tokens"])
    assert doc["max_model_len"] == 1024
    status, doc = _post(url + "/v1/completions/render", {"model": "tiny", "prompt": text, "max_tokens": 5})
    assert status == 200 and len(doc) == 1 and doc[0]["token_ids"] == hf.encode(text).ids
    assert doc[0]["sampling_params"]["max_tokens"] == 5 and doc[0]["model"] == "tiny"
    status, doc = _post(url + "/v1/completions/render", {"prompt": [3, 4, 5]})
    assert status == 200 and doc[0]["token_ids"] == [3, 4, 5]
    # The same refusals as /v1/completions, for the same body.
    status, doc = _post(url + "/tokenize", {"model": "gpt-9", "prompt": "x"})
    assert status == 404 and doc["error"]["param"] == "model"
    status, doc = _post(url + "/v1/completions/render", {"prompt": [VOCAB + 5]})
    assert status == 400 and doc["error"]["param"] == "prompt"
    # A chat is rendered through the checkpoint's template (jinja2 as the reference), then tokenized.
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    chat_ids = hf.encode(jinja2.Template(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=True)).ids
    status, doc = _post(url + "/v1/chat/completions/render", {"model": "tiny", "messages": messages})
    assert status == 200 and doc["token_ids"] == chat_ids  # one request, not a list
    status, doc = _post(url + "/tokenize", {"messages": messages})
    assert status == 200 and doc["tokens"] == chat_ids
    status, doc = _post(url + "/v1/chat/completions/render", {"messages": []})
    assert status == 400 and doc["error"]["param"] == "messages"
    status, body = _get(url + "/get_load")
    assert status == 200 and json.loads(body)["load"] == 0
    status, body = _get(url + "/get_model_info")
    assert status == 200 and json.loads(body)["model_path"] == "tiny"
    status, doc = _post(url + "/get_load", {})
    assert status == 405


# --- the deployment files ----------------------------------------------------------------------------------------

def _documents():
    docs = []
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "kubernetes", "*.yaml"))):
        with open(path) as f:
            docs += [(os.path.basename(path), d) for d in yaml.safe_load_all(f) if d]
    return docs


def _kind(docs, kind, name):
    found = [d for _, d in docs if d.get("kind") == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"one {kind} {name} in deploy/kubernetes"
    return found[0]


def _flag(args, name):
    return args[args.index(name) + 1]


def _serve_flags():
    out = subprocess.run([CLI, "serve", "--help"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"\[(--[a-z-]+)", out.stdout + out.stderr))


def _default_port():
    with open(os.path.join(ROOT, "src", "server", "server.h")) as f:
        return int(re.search(r"int port = (\d+);", f.read()).group(1))


@needs_cli
def test_kubernetes_manifests_match_a_running_replica(fleet):
    docs = _documents()
    assert {"deployment.yaml", "hpa.yaml", "router.yaml", "inference-pool.yaml"} <= {f for f, _ in docs}
    url = fleet["urls"][0]
    status, metrics_text = _get(url + "/metrics")
    assert status == 200
    exported = _metric_names(metrics_text)

    deployment = _kind(docs, "Deployment", "attnzoo")
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    args = container["args"]
    port = int(_flag(args, "--port"))
    assert port == _default_port() and _flag(args, "--host") == "0.0.0.0"
    assert container["ports"] == [{"name": "http", "containerPort": port}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] in (port, "http")
        assert _get(url + get["path"])[0] == 200, f"{probe}: {get['path']}"
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and int(annotations["prometheus.io/port"]) == port
    assert _get(url + annotations["prometheus.io/path"])[0] == 200
    # Every flag is one `attnzoo serve` takes (its usage text lists them).
    assert {a for a in args if a.startswith("--")} <= _serve_flags()
    assert "--kv-cache-memory" in args  # without it the pool is sized from the node's memory
    grace = float(_flag(args, "--shutdown-grace-seconds"))
    pre_stop = float(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["spec"]["terminationGracePeriodSeconds"] > pre_stop + grace
    # Resources: requests = limits; memory >= checkpoint + KV pool + 1 GiB; whole CPUs = the thread pool.
    res = container["resources"]
    assert res["requests"] == res["limits"]
    mib = int(res["requests"]["memory"].removesuffix("Mi"))
    need = int(annotations["attnzoo/checkpoint-bytes"]) + int(_flag(args, "--kv-cache-memory")) + (1 << 30)
    assert need <= mib << 20 < need + (1 << 30)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["ATTNZOO_THREADS"] == res["requests"]["cpu"]
    service = _kind(docs, "Service", "attnzoo")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    # HPA -> prometheus-adapter rule -> a metric the replica exports.
    hpa = _kind(docs, "HorizontalPodAutoscaler", "attnzoo")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "attnzoo"
    hpa_metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    adapter = dict(docs)["prometheus-adapter-values.yaml"]
    rule = next(r for r in adapter["rules"]["custom"] if r["name"]["as"] == hpa_metric)
    series = re.match(r"([a-z_:]+)\{", rule["seriesQuery"]).group(1)
    assert series == "vllm:num_requests_waiting" and series in exported
    assert re.fullmatch(rule["name"]["matches"], series)

    # InferencePool and its endpoint picker: the pods, the port, the metric names.
    pool = _kind(docs, "InferencePool", "attnzoo")
    assert pool["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert pool["spec"]["targetPorts"] == [{"number": port}]
    epp = _kind(docs, "Deployment", pool["spec"]["endpointPickerRef"]["name"])["spec"]["template"]["spec"]
    epp_args = epp["containers"][0]["args"]
    assert _get(url + _flag(epp_args, "--model-server-metrics-path"))[0] == 200
    for flag in ("--total-queued-requests-metric", "--total-running-requests-metric",
                 "--kv-cache-usage-percentage-metric"):
        assert _flag(epp_args, flag) in exported, flag
    assert _flag(epp_args, "--total-queued-requests-metric") == "vllm:num_requests_waiting"
    assert _flag(epp_args, "--kv-cache-usage-percentage-metric") == "vllm:kv_cache_usage_perc"
    # What the picker would read otherwise and attnzoo does not export is turned off.
    for flag, default in (("--lora-info-metric", "vllm:lora_requests_info"),
                          ("--cache-info-metric", "vllm:cache_config_info")):
        assert default not in exported and _flag(epp_args, flag) == ""
    assert int(_flag(epp_args, "--grpc-port")) == pool["spec"]["endpointPickerRef"]["port"]["number"]


@needs_cli
@needs_router
def test_router_manifest_parses_and_finds_the_replicas(fleet):
    """router.yaml's arguments read by vllm-router's own parser: the pods of deployment.yaml, on the port they
    serve, checked on a health path a replica answers."""
    from vllm_router.launch_router import parse_router_args
    docs = _documents()
    deployment = _kind(docs, "Deployment", "attnzoo")
    port = int(_flag(deployment["spec"]["template"]["spec"]["containers"][0]["args"], "--port"))
    router = parse_router_args(
        _kind(docs, "Deployment", "attnzoo-router")["spec"]["template"]["spec"]["containers"][0]["args"])
    assert router.service_discovery and router.selector == deployment["spec"]["selector"]["matchLabels"]
    assert router.service_discovery_port == port and router.policy == "cache_aware"
    assert _get(fleet["urls"][0] + router.health_check_endpoint)[0] == 200


def _dockerfile_stages():
    """[(base, name, [instruction lines])] of the Dockerfile, continuation lines joined."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            stages.append((m.group(1), m.group(2), []))
        elif stages:
            stages[-1][2].append(line)
    return stages


def _apt_packages(lines):
    packages = []
    for line in lines:
        for m in re.finditer(r"apt-get install ([^&]*)", line):
            packages += [p for p in m.group(1).split() if not p.startswith("-")]
    return set(packages)


def _needed_packages(binary):
    """Debian packages that own the shared libraries the binary names (ELF NEEDED), not counting libc6."""
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    paths = []
    for lib in re.findall(r"Shared library: \[(.+?)\]", out):
        where = re.search(r"\s" + re.escape(lib) + r" \(.*x86-64.*\) => (\S+)", cache)
        assert where, f"{lib} not found by ldconfig"
        # dpkg knows a file under the path its package installed it at: /lib or /usr/lib (merged /usr), through
        # the alternatives symlink or not (libopenblas.so.0).
        real = os.path.realpath(where.group(1))
        paths.append({where.group(1), real, real.removeprefix("/usr"), "/usr" + real.removeprefix("/usr")})
    owners = subprocess.run(["dpkg", "-S", *set().union(*paths)], capture_output=True, text=True).stdout
    owned = re.findall(r"^(\S+?)(?::\S+)?: (\S+)$", owners, re.M)  # "libhwy1:amd64: /usr/lib/..."
    packages = set()
    for candidates in paths:
        found = {pkg for pkg, path in owned if path in candidates}
        assert len(found) == 1, f"owner of {sorted(candidates)}: {found}"
        packages |= found
    return packages - {"libc6"}


@needs_cli
@pytest.mark.skipif(not (shutil.which("readelf") and shutil.which("dpkg")), reason="needs readelf and dpkg")
def test_dockerfile_builds_with_setup_packages_and_runs_with_only_the_needed_ones():
    stages = _dockerfile_stages()
    by_name = {name: (base, lines) for base, name, lines in stages}
    base, build = by_name["build"]
    with open(os.path.join(ROOT, "scripts", "setup.sh")) as f:
        setup = set(re.search(r'APT_PACKAGES="([^"]+)"', f.read()).group(1).split())
    assert _apt_packages(build) <= setup
    base, runtime = by_name["runtime"]
    assert base.endswith("-slim")
    # Exactly the packages of the libraries the binary links (Debian 12 names; the image's base is Debian 12).
    assert _apt_packages(runtime) == _needed_packages(CLI)
    assert any(re.fullmatch(r"COPY --from=build \S+ \S+", line) for line in runtime)
    user = [line.split()[1] for line in runtime if line.startswith("USER ")]
    assert user and not user[-1].startswith(("0", "root"))
    port = _default_port()
    assert f"EXPOSE {port}" in runtime and "STOPSIGNAL SIGTERM" in runtime
    healthcheck = next(line for line in runtime if line.startswith("HEALTHCHECK "))
    assert f"/dev/tcp/127.0.0.1/{port}" in healthcheck and "GET /health " in healthcheck
    entry = next(json.loads(line.split(None, 1)[1]) for line in runtime if line.startswith("ENTRYPOINT "))
    cmd = next(json.loads(line.split(None, 1)[1]) for line in runtime if line.startswith("CMD "))
    assert entry == ["attnzoo", "serve"]
    assert _flag(cmd, "--host") == "0.0.0.0" and int(_flag(cmd, "--port")) == port
    assert "--shutdown-grace-seconds" in cmd
    # The model can be baked in (target `model`) and the default target is the server itself.
    assert by_name["model"][0] == "runtime" and any("${MODEL_DIR}" in line for line in by_name["model"][1])
    assert stages[-1][0] == "runtime"
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        pin = re.search(r"^vllm-router==\S+", f.read(), re.M).group(0)
    assert any(pin in line for line in by_name["router"][1])


# --- the fleet behind the router ---------------------------------------------------------------------------------

def _bench(router, fleet, seed):
    out = subprocess.run([CLI, "bench", "serve", "--base-url", router.url, "--metrics-url", *fleet["urls"],
                          "--dataset", "shared-prefix", "--num-prefixes", str(GROUPS), "--prefix-len", str(PREFIX),
                          "--input-len", "12", "--output-len", "4", "--num-prompts", "300", "--max-concurrency", "16",
                          "--seed", str(seed), "--timeout", "20", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def test_fleet_hit_rate_sums_the_replicas_and_names_one_gone():
    from attnzoo.bench.serve import fleet_hit_rates
    before = {"http://a": (100.0, 50.0), "http://b": (40.0, 0.0), "http://c": (10.0, 10.0)}
    after = {"http://a": (300.0, 150.0), "http://b": (140.0, 60.0), "http://c": (10.0, 10.0)}
    rate, replicas = fleet_hit_rates(before, after)
    assert rate == pytest.approx(160 / 300)  # (100 + 60 + 0) / (200 + 100 + 0): not the mean of the rates
    assert [r["hit_rate"] for r in replicas] == [0.5, 0.6, None]
    rate, replicas = fleet_hit_rates(before, {"http://a": after["http://a"]})  # b and c died mid-run
    assert rate == 0.5 and replicas[1] == {"url": "http://b", "queried_tokens": None, "hit_tokens": None,
                                           "hit_rate": None}


@needs_cli
@needs_router
def test_cache_aware_routing_doubles_the_fleet_prefix_hit_rate(fleet):
    """300 requests from 30 system prompts at concurrency 16, through round-robin then cache-aware routing (other
    prompts, so the first run's cache does not help the second): the fleet's hit rate at least doubles."""
    docs = {}
    for seed, policy in enumerate(("round_robin", "cache_aware"), start=1):
        router = Router(fleet["urls"], policy)
        try:
            docs[policy] = _bench(router, fleet, seed)
        finally:
            router.close()
    for policy, doc in docs.items():
        assert doc["failed"] == 0 and doc["completed"] == 300, (policy, doc["errors"])
        assert len(doc["replicas"]) == 3
        print(f"{policy}: fleet prefix-cache hit rate {doc['prefix_cache_hit_rate']:.3f}, "
              f"mean TTFT {doc['ttft_ms']['mean']:.1f} ms, per replica "
              f"{[round(r['hit_rate'], 3) for r in docs[policy]['replicas']]}")
    # Each replica sees ~10 of the prompts: every request after a group's first finds its 128 tokens, at most
    # 9/10 * 128/140 of the prompt tokens.
    affinity, spread = docs["cache_aware"]["prefix_cache_hit_rate"], docs["round_robin"]["prefix_cache_hit_rate"]
    assert affinity <= 0.9 * PREFIX / (PREFIX + 12) + 1e-9
    assert affinity >= 2 * spread
    for r in docs["cache_aware"]["replicas"]:
        assert r["queried_tokens"] > 0  # the groups are spread, not all on one replica


@needs_cli
@needs_router
def test_killed_replica_fails_only_its_requests_in_flight(fleet):
    """Streams through a cache-aware router while one replica is killed (SIGKILL: no draining): requests sent
    after the kill all succeed, of those in flight only some fail (the killed replica's), none outlives its
    timeout, and the router takes the replica out of its rotation within its health checks (2 x 1 s)."""
    from attnzoo.bench.serve import Server
    router = Router(fleet["urls"], "cache_aware")
    try:
        rng = np.random.default_rng(7)
        prefixes = [rng.integers(0, VOCAB - 1, PREFIX).tolist() for _ in range(GROUPS)]
        prompts = [prefixes[i % GROUPS] + rng.integers(0, VOCAB - 1, 12).tolist() for i in range(240)]
        client = Server(router.url, timeout=20)
        results, killed = [None] * len(prompts), {}
        lock = threading.Semaphore(16)

        def one(i):
            try:
                body = {"model": "tiny", "prompt": prompts[i], "max_tokens": 48, "ignore_eos": True, "stream": True}
                start = time.time()
                _, _, error = client.stream_completion(body)
                results[i] = (start, time.time(), error)
            finally:
                lock.release()

        def kill_the_first_replica():
            time.sleep(0.5)
            # Requests the other two replicas run just before (a lower bound: one answering its last bytes has
            # left the engine already).
            loads = [_get(url + "/get_load", timeout=2) for url in fleet["urls"][1:]]
            killed["survivors"] = sum(json.loads(body)["load"] for status, body in loads if status == 200)
            fleet["procs"][0].kill()
            killed["at"] = time.time()

        killer = threading.Thread(target=kill_the_first_replica)
        killer.start()
        threads = []
        for i in range(len(results)):
            lock.acquire()
            threads.append(threading.Thread(target=one, args=(i,)))
            threads[-1].start()
        for t in threads:
            t.join(timeout=30)
        killer.join()
        assert "at" in killed, "the load ended before the kill: make it longer"
        deadline = killed["at"] + 6
        while router.healthy_workers() != 2 and time.time() < deadline:
            time.sleep(0.2)
        out_after = time.time() - killed["at"]
        assert router.healthy_workers() == 2, "the router still counts the killed replica healthy"
        assert all(r is not None for r in results), "a request thread hung"
        after = [r for r in results if r[0] >= killed["at"]]
        in_flight = [r for r in results if r[0] < killed["at"] < r[1]]
        failed = [r for r in results if r[2] is not None]
        print(f"{len(in_flight)} requests in flight at the kill ({killed['survivors']} on the others just before), "
              f"{len(failed)} failed; {len(after)} sent after it; out of the rotation after {out_after:.1f} s")
        assert after and all(r[2] is None for r in after), [r[2] for r in after if r[2]][:3]
        # Only requests in flight at the kill fail, and not those on the other replicas (which ones were on the
        # killed one only the router knows; when the others ran several just before, some were still running).
        assert all(r[0] < killed["at"] < r[1] for r in failed)
        if killed["survivors"] >= 3:
            assert len(failed) < len(in_flight)
        assert max(r[1] - r[0] for r in results) < 20
    finally:
        router.close()
