"""Measurements of bench/scale (issue 13). Standard library only. Secrets come from the
environment (BENCH_API_KEY) and are never printed.

    scale.py ready RELAY PID_FILE START_NS          seconds from START_NS until GET /readyz is 200
    scale.py rss PID                                VmRSS of PID in MB
    scale.py sample RELAY KIND N SAMPLE [SEED]      p50/p99 ms of one request kind, one JSON line
        KIND: silent (POST /v1/tokens/silent), silent-cold (the same, each account at most once),
              silent-hot (the same, drawn from 500 accounts asked once before: memory hits),
              username (GET /v1/accounts?username=), tenant (GET /v1/accounts?tenant_id= paging,
              SAMPLE pages of 50), refresh (forced)
    scale.py metric RELAY NAME [CONTAINS]           sum of a Prometheus metric's samples (lines containing CONTAINS)
    scale.py table RESULTS_JSONL                    the summary table and ratios to the smallest N
"""

import http.client
import json
import os
import random
import statistics
import sys
import time
import urllib.parse

SECOND_TENANT = "22222222-2222-2222-2222-222222222222"
SCOPES = ["https://graph.microsoft.com/User.Read"]


def account_id(index):
    return f"acc_scale_{index:010d}"


def silent_body(index):
    """The body of a silent request for seeded account `index`."""
    return {"account_id": account_id(index), "scopes": SCOPES}


class Client:
    """One keep-alive HTTP connection, reopened when the server closes it."""

    def __init__(self, base_url):
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.connection = None

    def request(self, method, path, body=None, headers=None):
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
            try:
                self.connection.request(method, path, body, headers or {})
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.connection.close()
                    self.connection = None
                return response.status, data
            except (http.client.HTTPException, ConnectionError, OSError):
                self.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def headers():
    return {"Authorization": "Bearer " + os.environ["BENCH_API_KEY"], "Content-Type": "application/json"}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def ready(relay, start_ns):
    client = Client(relay)
    start = int(start_ns)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            status, _ = client.request("GET", "/readyz")
            if status == 200:
                print(f"{(time.time_ns() - start) / 1e9:.3f}")
                return
        except OSError:
            client.connection = None
        time.sleep(0.01)
    raise SystemExit("ready: /readyz never answered 200")


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                print(f"{int(line.split()[1]) / 1024:.1f}")
                return
    raise SystemExit("rss: no VmRSS")


def sample(relay, kind, count, size, seed=1):
    """Sequential requests on one keep-alive connection; latency is the client's wall time."""
    count, size = int(count), int(size)
    rng = random.Random(int(seed))
    client = Client(relay)
    times, statuses = [], {}
    if kind == "tenant":
        cursor, pages = None, 0
        while pages < size:
            query = {"tenant_id": SECOND_TENANT, "limit": "50"}
            if cursor:
                query["cursor"] = cursor
            started = time.perf_counter()
            status, body = client.request("GET", "/v1/accounts?" + urllib.parse.urlencode(query), None, headers())
            times.append((time.perf_counter() - started) * 1000)
            statuses[status] = statuses.get(status, 0) + 1
            pages += 1
            page = json.loads(body)
            if status != 200 or not page.get("next_cursor"):
                cursor = None  # the end: start over (a small N has few pages)
            else:
                cursor = page["next_cursor"]
    else:
        # silent-cold: distinct accounts, so after a restart every request is a first visit that
        # memory cannot answer (random draws from 1,000 accounts repeat: the repeats are memory hits).
        # silent-hot: draws from 500 accounts, each asked once untimed first, so every timed
        # request is a memory hit at any N (the cap holds 500 accounts' tokens easily).
        if kind == "silent-cold":
            indexes = rng.sample(range(count), min(size, count))
        elif kind == "silent-hot":
            hot = rng.sample(range(count), min(500, count))
            for index in hot:
                client.request("POST", "/v1/tokens/silent", json.dumps(silent_body(index)), headers())
            indexes = [rng.choice(hot) for _ in range(size)]
        else:
            indexes = [rng.randrange(count) for _ in range(size)]
        for index in indexes:
            if kind == "username":
                path, method, body = "/v1/accounts?username=" + urllib.parse.quote(f"scale{index}@scale.example"), "GET", None
            else:
                body = silent_body(index)
                if kind == "refresh":
                    body["force_refresh"] = True
                path, method, body = "/v1/tokens/silent", "POST", json.dumps(body)
            started = time.perf_counter()
            status, data = client.request(method, path, body, headers())
            times.append((time.perf_counter() - started) * 1000)
            if status != 200 and status not in statuses:
                print(f"{kind} {index}: {status} {data[:300].decode(errors='replace')}", file=sys.stderr)
            statuses[status] = statuses.get(status, 0) + 1
            if kind == "refresh" and status == 200 and json.loads(data).get("source") != "refresh":
                statuses["not_refresh"] = statuses.get("not_refresh", 0) + 1
    print(json.dumps({
        "kind": kind, "requests": len(times), "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(percentile(times, 0.99), 3), "statuses": {str(k): v for k, v in statuses.items()},
    }))


def metric(relay, name, contains=""):
    status, body = Client(relay).request("GET", "/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and contains in line:
            total += float(line.rsplit(" ", 1)[1])
    print(f"{total:.0f}")


COLUMNS = [
    ("accounts", "N", None), ("load", "load", None), ("seed_s", "seed s", None), ("ready_s", "ready s", "ready_s"),
    ("rss_mb", "RSS MB", "rss_mb"), ("memory_hit_pct", "mem hit %", None),
    ("silent_p50", "cached p50", None), ("silent_p99", "cached p99", "silent_p99"),
    ("hot_p50", "hot p50", None), ("hot_p99", "hot p99", "hot_p99"),
    ("pg_silent_p50", "PG-only p50", None), ("pg_silent_p99", "PG-only p99", "pg_silent_p99"),
    ("username_p99", "username p99", "username_p99"), ("tenant_p99", "tenant page p99", "tenant_p99"),
    ("rotate_rows_s", "rotate rows/s", "rotate_rows_s"), ("migrate_s", "migrate s", "migrate_s"),
    ("wal_per_refresh", "WAL B/refresh", None),
]


def table(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        raise SystemExit("table: no results")
    rows.sort(key=lambda r: r["accounts"])
    base = rows[0]
    print("| " + " | ".join(label for _, label, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row.get(key, "")) for key, _, _ in COLUMNS) + " |")
    for row in rows[1:]:
        ratios = []
        for key, label, ratio in COLUMNS:
            if ratio and isinstance(row.get(key), (int, float)) and isinstance(base.get(key), (int, float)) and base[key]:
                ratios.append(f"{label} {row[key] / base[key]:.2f}x")
        print(f"ratios {row['accounts']} vs {base['accounts']}: " + ", ".join(ratios))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"ready": lambda: ready(args[0], args[2]), "rss": lambda: rss(args[0]),
     "sample": lambda: sample(*args), "metric": lambda: metric(*args), "table": lambda: table(args[0])}[command]()
