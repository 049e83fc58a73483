-- common.lua — shared by the bench/api wrk scripts (loaded with dofile).
-- Environment (set by bench/api/run):
--   BENCH_TOKEN   bearer token for droverd (absent for the nginx scenario)
--   BENCH_RESULT  file that done() writes one machine-readable line to
-- done() writes: requests duration_us p50_us p99_us non2xx connect read write timeout
-- (the same numbers wrk prints: "Requests/sec", the --latency distribution,
-- "Non-2xx or 3xx responses" and "Socket errors").

local token = os.getenv("BENCH_TOKEN")
bench_headers = {}
if token and token ~= "" then
   bench_headers["Authorization"] = "Bearer " .. token
end

function done(summary, latency, requests)
   local out = os.getenv("BENCH_RESULT")
   local e = summary.errors
   local line = string.format("%d %d %d %d %d %d %d %d %d\n",
      summary.requests, summary.duration,
      latency:percentile(50.0), latency:percentile(99.0),
      e.status, e.connect, e.read, e.write, e.timeout)
   if out and out ~= "" then
      local f = assert(io.open(out, "w"))
      f:write(line)
      f:close()
   else
      io.write("RESULT " .. line)
   end
end
