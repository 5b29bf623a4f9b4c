#!/usr/bin/env python3
"""A real gRPC server for taillab's tests and bench/grpc: Python grpcio (gRPC's C core) with
generic handlers, so request and response stay raw bytes and nothing is generated from
echo.proto (which declares the same methods for tools that need the types, such as ghz).

  /taillab.Echo/Echo  answers with the request (after --spin us of busy work)
  /taillab.Echo/Slow  sleeps --slow ms, then answers with the request
  /taillab.Echo/Fail  fails with status --fail-code (default UNAVAILABLE)
  any other method    UNIMPLEMENTED (grpcio's own answer)

Prints `listening PORT` on stdout once it serves (--port 0: the kernel picks). On SIGTERM or
SIGINT it writes the handlers' own service times, from entering the handler to returning, as
JSON to --stats (count, p50_ns, p99_ns, max_ns, by method) and exits: the server's own view of
its latency, which a client's sojourn must not undercut.
"""

import argparse
import json
import signal
import sys
import threading
import time
from concurrent import futures

import grpc


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--workers", type=int, default=4, help="handler threads")
    ap.add_argument("--slow", type=float, default=20.0, help="ms that Slow sleeps")
    ap.add_argument("--spin", type=float, default=0.0, help="us of busy work in Echo (a service time of its own)")
    ap.add_argument("--fail-code", default="UNAVAILABLE", help="status name that Fail returns")
    ap.add_argument("--stats", help="file for the service times, written at exit")
    ap.add_argument("--tls-cert", help="PEM certificate: serve TLS (with --tls-key)")
    ap.add_argument("--tls-key", help="PEM private key")
    return ap.parse_args()


def methods(a, lock, times):
    """The Echo service's three methods, each timed into ``times`` under ``lock``."""

    def timed(name, fn):
        def handler(request, context):
            t = time.perf_counter_ns()
            try:
                return fn(request, context)
            finally:
                d = time.perf_counter_ns() - t
                with lock:
                    times.setdefault(name, []).append(d)

        return grpc.unary_unary_rpc_method_handler(handler)

    def slow(request, context):
        time.sleep(a.slow / 1000)
        return request

    spin_ns = int(a.spin * 1000)

    def echo(request, context):
        end = time.perf_counter_ns() + spin_ns
        while time.perf_counter_ns() < end:
            pass
        return request

    fail_code = grpc.StatusCode[a.fail_code]

    def fail(request, context):
        context.abort(fail_code, "taillab echo server: Fail always fails")

    return {
        "/taillab.Echo/Echo": timed("Echo", echo),
        "/taillab.Echo/Slow": timed("Slow", slow),
        "/taillab.Echo/Fail": timed("Fail", fail),
    }


def write_stats(path, lock, times):
    """Each method's count, p50, p99 and max service time (ns) as JSON."""
    out = {}
    with lock:
        for name, v in times.items():
            v = sorted(v)
            out[name] = {
                "count": len(v),
                "p50_ns": v[len(v) // 2],
                "p99_ns": v[min(len(v) - 1, int(len(v) * 0.99))],
                "max_ns": v[-1],
            }
    with open(path, "w") as f:
        json.dump(out, f)


def main():
    a = parse_args()
    lock = threading.Lock()
    times = {}
    table = methods(a, lock, times)

    class Handler(grpc.GenericRpcHandler):
        def service(self, details):
            return table.get(details.method)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=a.workers), handlers=[Handler()])
    addr = f"{a.host}:{a.port}"
    if a.tls_cert:
        creds = grpc.ssl_server_credentials([(open(a.tls_key, "rb").read(), open(a.tls_cert, "rb").read())])
        port = server.add_secure_port(addr, creds)
    else:
        port = server.add_insecure_port(addr)
    server.start()
    print(f"listening {port}", flush=True)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop(0.5)
    if a.stats:
        write_stats(a.stats, lock, times)
    return 0

if __name__ == "__main__":
    sys.exit(main())
