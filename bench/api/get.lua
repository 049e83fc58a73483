-- get.lua — GET one URL (the one on wrk's command line), authenticated
-- when BENCH_TOKEN is set. Used for nginx static, droverd GET and list.
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

wrk.method = "GET"
for k, v in pairs(bench_headers) do
   wrk.headers[k] = v
end
