-- wrk script of bench/scale: every account 0…N-1 once with a cached silent request, split
-- between wrk's threads (thread t: t, t + T, …). A thread stops once it has an answer for each
-- of its accounts and leaves an empty file named after itself in BENCH_DONE_DIR: wrk's main thread
-- sleeps for the whole -d regardless, so bench/scale sends it SIGINT once every thread's file is
-- there, and done() prints "touched <answers> non2xx <count>". Environment: BENCH_ACCOUNTS
-- (N), BENCH_THREADS (wrk's -t: each thread's init runs right after its own setup, before the
-- next thread exists, so the count cannot be learnt from setup), BENCH_AUTHORIZATION, BENCH_SCOPE.
local threads = {}
local count = tonumber(os.getenv("BENCH_ACCOUNTS"))
local thread_total = tonumber(os.getenv("BENCH_THREADS"))

function setup(thread)
  thread:set("thread_index", #threads)
  thread:set("thread_count", thread_total)
  table.insert(threads, thread)
end

function init(args)
  next_index, answers, non2xx = thread_index, 0, 0
  -- wrk calls thread 0's request() once to check the script before sending anything.
  verify_pending = thread_index == 0
  share = math.floor((count - thread_index + thread_count - 1) / thread_count)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = os.getenv("BENCH_AUTHORIZATION")
  scope = os.getenv("BENCH_SCOPE")
end

function request()
  -- Once the thread's accounts are all asked, its connections ask GET /healthz until the last
  -- answers are in: those answers are told apart by their body and not counted.
  if next_index >= count then return wrk.format("GET", "/healthz", {}, nil) end
  local index = next_index
  if verify_pending then verify_pending = false else next_index = next_index + thread_count end
  local body = string.format('{"account_id":"acc_scale_%010d","scopes":["%s"]}', index, scope)
  return wrk.format(nil, "/v1/tokens/silent", nil, body)
end

function response(status, headers, body)
  local ok = status >= 200 and status <= 299
  if ok and not string.find(body, '"access_token"', 1, true) then return end  -- a /healthz answer
  answers = answers + 1
  if not ok then non2xx = non2xx + 1 end
  if answers == share then
    io.open(os.getenv("BENCH_DONE_DIR") .. "/thread-" .. thread_index, "w"):close()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local answered, failed = 0, 0
  for _, t in ipairs(threads) do
    answered = answered + t:get("answers")
    failed = failed + t:get("non2xx")
  end
  io.write(string.format("touched %d non2xx %d\n", answered, failed))
end
