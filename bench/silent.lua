-- wrk script: POST /v1/tokens/silent for one account (cache hits), as a backend service would.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_API_KEY")
wrk.body = '{"account_id": "' .. os.getenv("BENCH_ACCOUNT_ID") .. '", "scopes": ["User.Read"]}'
