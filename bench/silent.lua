-- wrk script: the benchmarked POST (bench/run sets path, Authorization and body), as a backend
-- service would send it; without BENCH_AUTHORIZATION no Authorization header is sent.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local authorization = os.getenv("BENCH_AUTHORIZATION")
if authorization ~= nil and authorization ~= "" then wrk.headers["Authorization"] = authorization end
wrk.body = os.getenv("BENCH_BODY")
