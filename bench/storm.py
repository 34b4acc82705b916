"""Glue for bench/storm: users file, seeding, the database probe and the refresh-overhead
measurement. Standard library only. Secrets come from the environment (BENCH_API_KEY,
BENCH_CLIENT_SECRET) and are never printed.

    storm.py users COUNT FILE USERNAMES             write the emulator's users file
    storm.py controls EMULATOR JSON USERS...        POST per-user controls to the emulator
    storm.py seed RELAY USERS_FILE OUT              sign every storm user in, account ids to OUT
    storm.py check RELAY ACCOUNTS_FILE COUNT        COUNT silent requests must answer source=refresh
    storm.py probe RELAY USERS_FILE SECONDS RATE    p99 of DB-touching requests, one JSON line
    storm.py overhead RELAY EMULATOR TENANT CLIENT_ID ACCOUNT_ID USERNAME COUNT
                                                    forced refreshes vs. the emulator's own time
    storm.py report WRK_OUT PROBE_BEFORE PROBE_DURING OVERHEAD CONNECTIONS LATENCY_MS ACCOUNTS STS_REFRESHES RELAY_LOG
                                                    the summary lines
"""

import concurrent.futures
import http.client
import json
import os
import re
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request

TENANT = "11111111-1111-1111-1111-111111111111"
DOMAIN = "contoso.example"
SCOPES = ["User.Read"]
# What token-relay sends for ["User.Read"] (ScopeSet.wireValue): the emulator's direct
# measurement must cost the emulator the same work (access token and id token).
WIRE_SCOPE = "https://graph.microsoft.com/User.Read openid profile offline_access"
OVERHEAD_USER = "overhead@" + DOMAIN


def storm_user(index):
    return f"storm{index:04d}@{DOMAIN}"


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


class Client:
    """One keep-alive HTTP connection (http.client), reopened when the server closes it."""

    def __init__(self, base_url):
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.connection = None

    def request(self, method, path, body=None, headers=None):
        """→ (status, decoded JSON or None). Retries once on a connection the server dropped."""
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
            try:
                self.connection.request(method, path, body, headers or {})
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                try:
                    return response.status, json.loads(data) if data else None
                except ValueError:
                    return response.status, None
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt == 2:
                    raise

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def relay_headers():
    return {"Authorization": "Bearer " + os.environ["BENCH_API_KEY"], "Content-Type": "application/json"}


def percentile(values, fraction):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


# ---- set-up ---------------------------------------------------------------------------------

def write_users(count, path, usernames_path):
    """The emulator's directory: one tenant (the relay's authority) with COUNT storm users and
    the overhead user; the storm users' names also go to USERNAMES, one a line. Object ids are
    derived from the index so runs are repeatable."""
    users = [{"username": storm_user(i), "name": f"Storm User {i}", "oid": f"5707a000-0000-4000-8000-{i:012d}"}
             for i in range(1, count + 1)]
    users.append({"username": OVERHEAD_USER, "name": "Overhead User", "oid": "0e4ead00-0000-4000-8000-000000000001"})
    with open(path, "w") as f:
        json.dump({"tenants": [{"id": TENANT, "domains": [DOMAIN], "users": users}]}, f)
    with open(usernames_path, "w") as f:
        f.write("".join(storm_user(i) + "\n" for i in range(1, count + 1)))


def post_controls(emulator, controls, usernames):
    """Same per-user controls for many users, 8 at a time (each answer is immediate)."""
    body = json.dumps(json.loads(controls))
    local = threading.local()

    def one(username):
        if not hasattr(local, "client"):
            local.client = Client(emulator)
        status, _ = local.client.request("POST", "/_control/users/" + urllib.parse.quote(username), body,
                                         {"Content-Type": "application/json"})
        if status != 200:
            raise SystemExit(f"controls for {username}: HTTP {status}")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(one, usernames))


def sign_in(relay, username):
    """POST /v1/sign-ins, then follow authorize_url (emulator → 302 → relay callback, which
    answers the account as JSON), as bench/run does with curl -L. → account_id."""
    body = json.dumps({"scopes": SCOPES, "login_hint": username}).encode()
    request = urllib.request.Request(relay + "/v1/sign-ins", body, relay_headers(), method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        authorize_url = json.load(response)["authorize_url"]
    with urllib.request.urlopen(authorize_url, timeout=60) as response:
        return json.load(response)["account"]["account_id"]


def seed(relay, users_file, out):
    """Signs every user in, 8 at a time (the relay's pool is 8 by default); writes the account
    ids in the users' order."""
    usernames = read_lines(users_file)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda u: sign_in(relay, u), usernames))
    if len(set(ids)) != len(ids):
        raise SystemExit("seeding: two users got the same account")
    with open(out, "w") as f:
        f.write("\n".join(ids) + "\n")


def check_refresh(relay, accounts_file, count):
    """The storm is only meaningful if every silent request redeems the refresh token."""
    client = Client(relay)
    for account_id in read_lines(accounts_file)[:count]:
        status, body = client.request("POST", "/v1/tokens/silent",
                                      json.dumps({"account_id": account_id, "scopes": SCOPES}), relay_headers())
        source = (body or {}).get("source")
        if status != 200 or source != "refresh":
            raise SystemExit(f"check: silent request answered {status} source={source}, expected 200 source=refresh "
                             "(are the emulator's tokens expired on arrival?)")


# ---- database probe -------------------------------------------------------------------------

def probe(relay, users_file, seconds, rate):
    """Open-loop probe: every 1/RATE s a GET /v1/accounts?username=… and a POST /v1/sign-ins
    (both need PostgreSQL) are started on a worker pool. A request's latency counts from the
    moment it was due, so a slow server cannot hide behind fewer samples (coordinated omission).
    Prints {"accounts": [ms...], "sign_ins": [ms...], "errors": {...}} on one line."""
    usernames = read_lines(users_file)
    local = threading.local()
    lock = threading.Lock()
    latencies = {"accounts": [], "sign_ins": []}
    errors = {}

    def one(kind, username, due):
        if not hasattr(local, "client"):
            local.client = Client(relay)
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            if kind == "accounts":
                status, _ = local.client.request("GET", "/v1/accounts?username=" + urllib.parse.quote(username),
                                                 headers=relay_headers())
                ok = status == 200
            else:
                body = json.dumps({"scopes": SCOPES, "login_hint": username})
                status, _ = local.client.request("POST", "/v1/sign-ins", body, relay_headers())
                ok = status == 201
        except (http.client.HTTPException, OSError) as error:
            status, ok = type(error).__name__, False
        elapsed_ms = (time.monotonic() - due) * 1000
        with lock:
            latencies[kind].append(elapsed_ms)
            if not ok:
                errors[f"{kind} {status}"] = errors.get(f"{kind} {status}", 0) + 1

    start = time.monotonic() + 0.05
    ticks = int(seconds * rate)
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        for i in range(ticks):
            due = start + i / rate
            username = usernames[i % len(usernames)]
            pool.submit(one, "accounts", username, due)
            pool.submit(one, "sign_ins", username, due)
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    print(json.dumps({"accounts": latencies["accounts"], "sign_ins": latencies["sign_ins"], "errors": errors}))


# ---- refresh overhead ------------------------------------------------------------------------

def overhead(relay, emulator, tenant, client_id, account_id, username, count):
    """Sequential forced refreshes through the relay, interleaved one for one with the same kind
    of refresh_token grant sent straight to the emulator (so both see the same machine load).
    The emulator rotates refresh tokens strictly: each direct call uses the token the previous
    one returned, starting from an ADAL-style token minted at the control endpoint."""
    relay_client, emulator_client = Client(relay), Client(emulator)
    status, minted = emulator_client.request("POST", f"/_control/users/{urllib.parse.quote(username)}/adal-refresh-token")
    if status != 201:
        raise SystemExit(f"overhead: minting a refresh token answered {status}")
    refresh_token = minted["refresh_token"]
    silent = json.dumps({"account_id": account_id, "scopes": SCOPES, "force_refresh": True})
    token_path = f"/{tenant}/oauth2/v2.0/token"
    secret = os.environ["BENCH_CLIENT_SECRET"]
    form_headers = {"Content-Type": "application/x-www-form-urlencoded"}
    relay_ms, emulator_ms = [], []
    warmup = min(20, count // 5)
    relay_pid = os.environ.get("BENCH_RELAY_PID")
    cost_before = relay_cost(relay_pid)
    for i in range(warmup + count):
        began = time.perf_counter()
        status, body = relay_client.request("POST", "/v1/tokens/silent", silent, relay_headers())
        took = (time.perf_counter() - began) * 1000
        if status != 200 or body.get("source") != "refresh":
            raise SystemExit(f"overhead: forced refresh answered {status} source={(body or {}).get('source')}")
        if i >= warmup:
            relay_ms.append(took)

        form = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": refresh_token, "scope": WIRE_SCOPE,
                                       "client_id": client_id, "client_secret": secret, "client_info": "1"})
        began = time.perf_counter()
        status, body = emulator_client.request("POST", token_path, form, form_headers)
        took = (time.perf_counter() - began) * 1000
        if status != 200:
            raise SystemExit(f"overhead: direct refresh at the emulator answered {status} {(body or {}).get('error')}")
        refresh_token = body["refresh_token"]
        if i >= warmup:
            emulator_ms.append(took)
    cost_after = relay_cost(relay_pid)
    cost = None
    if cost_before and cost_after:
        cost = {k: cost_after[k] - cost_before[k] for k in cost_before if k != "threads"}
        cost["requests"] = warmup + count
        cost["threads"] = switches_by_thread(cost_before["threads"], cost_after["threads"])
    print(json.dumps({"relay": relay_ms, "emulator": emulator_ms, "relay_cost": cost}))


def relay_cost(pid):
    """The relay's CPU seconds (user + system, /proc/PID/stat) and context switches summed over its
    threads (/proc/PID/task/*/status): figures of the work per request that do not swing with the
    machine's load as wall time does. A voluntary switch is a thread going to sleep: every hand-off
    to another thread is one (the waker goes on, the woken one slept). None without a pid."""
    if not pid:
        return None
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cost = {"cpu_s": (int(fields[11]) + int(fields[12])) / ticks, "voluntary": 0, "involuntary": 0, "threads": {}}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                name = f.read().strip()
            switches = [0, 0]
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        switches[0] = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        switches[1] = int(line.split()[1])
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        cost["voluntary"] += switches[0]
        cost["involuntary"] += switches[1]
        cost["threads"][task] = (name, switches[0], switches[1])
    return cost


def switches_by_thread(before, after):
    """Voluntary and involuntary switches per kind of thread (its name, digits as `N`:
    postgres-N, the pool's workers) between two readings of relay_cost: who went to sleep how
    often, which is where the hand-offs are. A thread started meanwhile counts from zero; one
    that ended meanwhile is lost (libdispatch's idle workers may end)."""
    kinds = {}
    for tid, (name, voluntary, involuntary) in after.items():
        _, was_voluntary, was_involuntary = before.get(tid, (name, 0, 0))
        kind = re.sub(r"[0-9]+", "N", name)
        counts = kinds.setdefault(kind, [0, 0, 0])
        counts[0] += voluntary - was_voluntary
        counts[1] += involuntary - was_involuntary
        counts[2] += 1
    return kinds


# ---- report ---------------------------------------------------------------------------------

def read_wrk(path):
    """The "storm ..." lines storm.lua's done() printed → (duration_s, requests, answers, socket_errors, latency text)."""
    duration, requests, answers, socket_errors, latency = 0.0, 0, {}, {}, ""
    for line in read_lines(path):
        words = line.split()
        if words[0] != "storm":
            continue
        if words[1] == "duration_us":
            duration = int(words[2]) / 1e6
        elif words[1] == "requests":
            requests = int(words[2])
        elif words[1] == "answer":
            answers[words[2] + " " + words[3]] = int(words[4])
        elif words[1] == "socket_error" and int(words[3]) > 0:
            socket_errors[words[2]] = int(words[3])
        elif words[1] == "latency_ms":
            latency = " ".join(words[2:])
    return duration, requests, answers, socket_errors, latency


def probe_summary(path):
    """→ (p99 over both routes, detail text)."""
    with open(path) as f:
        data = json.load(f)
    both = data["accounts"] + data["sign_ins"]
    detail = (f"GET /v1/accounts p99 {percentile(data['accounts'], 0.99):.1f} ms, "
              f"POST /v1/sign-ins p99 {percentile(data['sign_ins'], 0.99):.1f} ms, "
              f"both p50 {percentile(both, 0.5):.1f} ms max {max(both):.1f} ms (n={len(both)})")
    errors = data["errors"]
    detail += ", failed: " + (", ".join(f"{k} ×{v}" for k, v in sorted(errors.items())) if errors else "none")
    return percentile(both, 0.99), detail


def log_summary(path):
    """Counts of the relay's log lines (JSON, level warn and up) by level and event: no fields
    beyond those two are printed."""
    counts = {}
    for line in read_lines(path):
        try:
            entry = json.loads(line)
            label = f"{entry.get('level', '?')} {entry.get('event', '?')}"
        except ValueError:
            label = "unparsed"
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) if counts else "none"


def report(wrk_file, before_file, during_file, overhead_file, connections, latency_ms, accounts, sts_refreshes, relay_log):
    duration, requests, answers, socket_errors, latency = read_wrk(wrk_file)
    refreshes = answers.get("200 refresh", 0)
    ideal = connections / (latency_ms / 1000)
    rate = refreshes / duration
    others = {k: v for k, v in answers.items() if k != "200 refresh"}
    others.update({"socket " + k: v for k, v in socket_errors.items()})
    other_text = ", ".join(f"{k} ×{v}" for k, v in sorted(others.items())) if others else "none"
    before_p99, before_detail = probe_summary(before_file)
    during_p99, during_detail = probe_summary(during_file)
    print(f"refresh storm: {rate:.1f} refresh answers/s = {rate / ideal:.3f} of ideal {ideal:.0f}/s (target >= 0.8); "
          f"DB probe p99 {before_p99:.1f} ms before, {during_p99:.1f} ms during (target <= 50 ms); other answers: {other_text}")
    print(f"  storm: {accounts} accounts, {connections} callers, STS refresh latency {latency_ms} ms, {duration:.1f} s, "
          f"{requests} requests, {refreshes} refresh answers, {sts_refreshes} refresh grants at the emulator "
          f"(those still in flight when wrk stopped included); "
          f"wrk latency {latency}")
    print(f"  probe before: {before_detail}")
    print(f"  probe during: {during_detail}")
    with open(overhead_file) as f:
        data = json.load(f)
    relay, emulator = data["relay"], data["emulator"]
    relay_median, emulator_median = statistics.median(relay), statistics.median(emulator)
    relay_p90, emulator_p90 = percentile(relay, 0.9), percentile(emulator, 0.9)
    print(f"refresh overhead: {relay_median - emulator_median:.2f} ms median beyond the STS (target <= 1 ms), "
          f"p90 {relay_p90 - emulator_p90:.2f} ms; relay median {relay_median:.2f} ms p90 {relay_p90:.2f} ms, "
          f"emulator alone median {emulator_median:.2f} ms p90 {emulator_p90:.2f} ms ({len(relay)} sequential forced refreshes each)")
    cost = data.get("relay_cost")
    if cost:
        n = cost["requests"]
        print(f"  relay cost per forced refresh: {cost['cpu_s'] * 1000 / n:.2f} ms CPU (user + system), "
              f"{cost['voluntary'] / n:.1f} voluntary and {cost['involuntary'] / n:.1f} involuntary context switches "
              f"(over all {n} requests of the overhead part, warm-up included; the relay's own timers too)")
        threads = sorted(cost.get("threads", {}).items(), key=lambda item: -item[1][0])
        print("  voluntary / involuntary switches per forced refresh by thread: " + ", ".join(
            f"{kind} ×{count} {voluntary / n:.2f} / {involuntary / n:.2f}"
            for kind, (voluntary, involuntary, count) in threads if voluntary or involuntary))
    print(f"  relay log (warn and up): {log_summary(relay_log)}")


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "users":
        write_users(int(args[0]), args[1], args[2])
    elif command == "controls":
        post_controls(args[0], args[1], args[2:] if args[2:] != ["-"] else read_lines("/dev/stdin"))
    elif command == "seed":
        seed(args[0], args[1], args[2])
    elif command == "check":
        check_refresh(args[0], args[1], int(args[2]))
    elif command == "probe":
        probe(args[0], args[1], float(args[2]), float(args[3]))
    elif command == "overhead":
        overhead(args[0], args[1], args[2], args[3], args[4], args[5], int(args[6]))
    elif command == "report":
        report(*args[:4], int(args[4]), int(args[5]), int(args[6]), args[7], args[8])
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
