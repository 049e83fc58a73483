-- predict.lua — POST {"inputs":"hi"} to the URL on wrk's command line,
-- authenticated when BENCH_TOKEN is set (bench/api/common.lua: the result line).
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

wrk.method = "POST"
wrk.body = '{"inputs":"hi"}'
wrk.headers["Content-Type"] = "application/json"
for k, v in pairs(bench_headers) do
   wrk.headers[k] = v
end
