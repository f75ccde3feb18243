#!/usr/bin/env python3
"""M15's last criterion: the aggregate decode rate of N concurrent streaming clients of `strata serve`
against `strata bench decode --batch N` on the same model and budget.

Starts `strata serve SERVE_ARGS --port 0 --parallel N` (the port read from its "listening on" line),
waits for /health, runs N clients at once (threads + http.client; each POSTs a streamed
/v1/completions, greedy, max_tokens T, and parses the server-sent events), then SIGTERMs the server
and waits for it to drain and exit. Python 3 standard library only (the GPU machine has no node and
no network).

Two rates, both from the times the clients received their text chunks (one chunk per token, except
where the server held back half a UTF-8 character; the chunk count is checked against usage):
  steady:  chunks received while every client was decoding (after the last client's first token,
           up to the first client's last token) / that window's length. Same shape as
           `bench decode --batch N`: N sessions stepping together, no prefill inside.
  overall: tokens after each client's first token (usage) / (last token anywhere - first token
           anywhere). Includes the server prefilling the later prompts while others wait (a new
           prompt prefills alone, src/server/README.md), so it is the lower one.
The ratio printed is steady / bench's batch_tok_per_s.

  tools/device/serve_load.py --strata strata --clients 8 --tokens 64 --bench-json bench_b8.json \
      --out serve_load.json -- -m 27b.gguf --vram 12GiB --profile configs/hw/h200-probed.toml -c 4096
Exit status: 0 when every client got a complete stream and the server exited 0; 1 otherwise.
"""
import argparse
import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time

PROMPT_WORDS = ("the scheduler picks the next task by priority and every queue has its own level while "
                "workers take tasks from the front of the queue and put them back when they wait for input ").split()


def prompt_for(i, words):
    # Different text per client (no two prefills alike), about `words` words long.
    w = [f"client{i}"] + [PROMPT_WORDS[(k + i) % len(PROMPT_WORDS)] for k in range(words)]
    return " ".join(w)


class Server:
    """`strata serve` as a child process; its stderr goes to a log file and is watched for the port."""

    def __init__(self, strata, args, log_path, start_timeout):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([strata, "serve", *args, "--port", "0"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        self.port = None
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.log.write(line)
                self.log.flush()
                m = re.search(r"listening on http://[0-9.]+:([0-9]+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()
            found.set()  # the server exited

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(start_timeout) or self.port is None:
            self.stop(signal.SIGKILL)
            raise RuntimeError(f"strata serve did not start (see {log_path})")

    def wait_health(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("/health did not answer 200")

    def stop(self, sig=signal.SIGTERM, timeout=600):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.reader.join(5)
        self.log.close()
        return rc


def run_client(port, i, args, start, result):
    """One streamed completion; result gets the arrival time of every text chunk and the usage."""
    body = {"prompt": prompt_for(i, args.prompt_words), "max_tokens": args.tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True},
            # Not a strata field (unknown fields are ignored): servers that know it do not stop at
            # end-of-text, so a run against them measures the same token count.
            "ignore_eos": True}
    r = {"chunks": [], "usage": None, "finish": None, "done": False, "error": None}
    result[i] = r
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=args.timeout)
        start.wait()
        r["sent"] = time.monotonic()
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            r["error"] = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                r["done"] = True
                break
            ev = json.loads(data)
            if "error" in ev:
                r["error"] = ev["error"].get("message")
                break
            if ev.get("usage"):
                r["usage"] = ev["usage"]
            for ch in ev.get("choices", []):
                if ch.get("text"):
                    r["chunks"].append(time.monotonic())
                if ch.get("finish_reason"):
                    r["finish"] = ch["finish_reason"]
    except Exception as e:  # noqa: BLE001 - reported, and the run fails
        r["error"] = repr(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strata", default="strata")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=240,
                    help="prompt length in words (240: about 256 tokens, bench decode -p 256, with the embedded model)")
    ap.add_argument("--bench-json", help="`strata bench decode --batch N --json` output to compare with")
    ap.add_argument("--out", help="write the figures here (JSON)")
    ap.add_argument("--server-log", default="serve_load_server.log")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for the server start and each stream")
    ap.add_argument("serve_args", nargs=argparse.REMAINDER, help="-- then strata serve's arguments (-m ...)")
    args = ap.parse_args()
    serve_args = [a for a in args.serve_args if a != "--"]
    serve_args += ["--parallel", str(args.clients)]

    srv = Server(args.strata, serve_args, args.server_log, args.timeout)
    results = [None] * args.clients
    try:
        srv.wait_health(60)
        start = threading.Event()
        threads = [threading.Thread(target=run_client, args=(srv.port, i, args, start, results))
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(0.2)  # every client connected and waiting
        start.set()
        for t in threads:
            t.join()
    finally:
        rc = srv.stop()

    ok = rc == 0
    for i, r in enumerate(results):
        if r is None or r["error"] or not r["done"] or not r["chunks"]:
            print(f"client {i}: FAILED {r and r['error']} (done {r and r['done']})")
            ok = False
    good = [r for r in results if r and r["chunks"]]
    fig = {"clients": args.clients, "tokens_asked": args.tokens, "server_exit": rc}
    if good:
        first = [r["chunks"][0] for r in good]
        last = [r["chunks"][-1] for r in good]
        usage_tokens = [r["usage"]["completion_tokens"] if r["usage"] else len(r["chunks"]) for r in good]
        # steady: while every client was decoding
        t0, t1 = max(first), min(last)
        steady_chunks = sum(sum(1 for t in r["chunks"] if t0 < t <= t1) for r in good)
        steady = steady_chunks / (t1 - t0) if t1 > t0 and len(good) == args.clients else 0.0
        span = max(last) - min(first)
        overall = sum(n - 1 for n in usage_tokens) / span if span > 0 else 0.0
        fig.update({
            "tokens_received": usage_tokens,
            "chunks_received": [len(r["chunks"]) for r in good],
            "prompt_tokens": [r["usage"]["prompt_tokens"] if r["usage"] else None for r in good],
            "first_token_s": [round(f - r["sent"], 3) for f, r in zip(first, good)],
            "steady_window_s": round(max(t1 - t0, 0), 3),
            "steady_tok_per_s": steady,
            "overall_window_s": round(span, 3),
            "overall_tok_per_s": overall,
        })
        print(f"serve: {len(good)} clients, tokens received {usage_tokens} (chunks {fig['chunks_received']}), "
              f"first token after {fig['first_token_s']} s")
        print(f"serve: {steady:.2f} tok/s in all while all {args.clients} decoded ({fig['steady_window_s']} s "
              f"window); {overall:.2f} tok/s over the whole decode phase ({fig['overall_window_s']} s, "
              f"prefills of later prompts included)")
        if sum(usage_tokens) < args.clients * args.tokens:
            print(f"note: {args.clients * args.tokens - sum(usage_tokens)} of {args.clients * args.tokens} tokens not "
                  "generated (end-of-text)")
    if args.bench_json:
        bench = json.load(open(args.bench_json))
        b = bench.get("batch_tok_per_s", 0.0)
        fig["bench_batch"] = bench.get("batch")
        fig["bench_batch_tok_per_s"] = b
        fig["bench_single_tok_per_s"] = bench.get("tok_per_s")
        if b > 0 and good:
            fig["ratio_steady"] = fig["steady_tok_per_s"] / b
            fig["ratio_overall"] = fig["overall_tok_per_s"] / b
            print(f"bench decode --batch {bench.get('batch')}: {b:.2f} tok/s in all | serve/bench = "
                  f"{fig['ratio_steady']:.3f} steady, {fig['ratio_overall']:.3f} overall "
                  f"(criterion: steady >= 0.90) -> {'PASS' if fig['ratio_steady'] >= 0.9 else 'MISS'}")
    print(f"server exit status {rc}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(fig, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
