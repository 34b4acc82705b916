-- wrk script for bench/storm (run with -t1): POST /v1/tokens/silent round robin over the
-- account ids in BENCH_ACCOUNTS_FILE, one a line. With more accounts than connections, the
-- requests in flight are for distinct accounts, so the relay cannot coalesce them.
-- Counts answers by status and `source` (200) or `error` (problems); done() prints them as
-- "storm ..." lines for bench/storm to read.
local ids = {}
for line in io.lines(os.getenv("BENCH_ACCOUNTS_FILE")) do
  if line ~= "" then ids[#ids + 1] = line end
end
local key = os.getenv("BENCH_API_KEY")
local next_index = 0
answers = {}  -- global: done() reads it from the thread with thread:get

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

function request()
  next_index = next_index % #ids + 1
  local body = '{"account_id": "' .. ids[next_index] .. '", "scopes": ["User.Read"]}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end

function response(status, headers, body)
  local label
  if status == 200 then
    label = "200 " .. (body:match('"source"%s*:%s*"([%w_]+)"') or "no_source")
  else
    label = status .. " " .. (body:match('"error"%s*:%s*"([%w_]+)"') or "no_error")
  end
  answers[label] = (answers[label] or 0) + 1
end

function done(summary, latency, requests)
  local totals = {}
  for _, thread in ipairs(threads) do
    for label, count in pairs(thread:get("answers")) do totals[label] = (totals[label] or 0) + count end
  end
  io.write(string.format("storm duration_us %d\n", summary.duration))
  io.write(string.format("storm requests %d\n", summary.requests))
  for label, count in pairs(totals) do io.write(string.format("storm answer %s %d\n", label, count)) end
  for _, name in ipairs({"connect", "read", "write", "timeout"}) do
    io.write(string.format("storm socket_error %s %d\n", name, summary.errors[name]))
  end
  io.write(string.format("storm latency_ms p50 %.1f p99 %.1f max %.1f\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
