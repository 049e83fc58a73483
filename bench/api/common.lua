-- common.lua — shared by the bench/api wrk scripts (loaded with dofile).
-- Environment (set by bench/api/run):
--   BENCH_TOKEN   bearer token for droverd (absent for the nginx scenario)
--   BENCH_RESULT  file that done() writes one machine-readable line to
--   BENCH_WRK_REQUESTS  (smoke mode, bench/smoke.sh) each wrk thread stops
--                 after that many responses: wrk still waits out its -d, but
--                 the load, and the CPU it costs, end there. Unset, every
--                 thread runs the whole -d, and no response() is defined (wrk
--                 then hands no response to Lua: the full run is as it was).
-- done() writes: requests duration_us p50_us p99_us non2xx connect read write timeout
-- (the same numbers wrk prints: "Requests/sec", the --latency distribution,
-- "Non-2xx or 3xx responses" and "Socket errors").

local token = os.getenv("BENCH_TOKEN")
bench_headers = {}
if token and token ~= "" then
   bench_headers["Authorization"] = "Bearer " .. token
end

local cap = tonumber(os.getenv("BENCH_WRK_REQUESTS") or "")
if cap and cap > 0 then
   local seen = 0
   function response()
      seen = seen + 1
      if seen >= cap then
         wrk.thread:stop()
      end
   end
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
